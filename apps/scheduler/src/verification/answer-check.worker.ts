import { parentPort, workerData } from 'node:worker_threads';
import { verifyAnswer } from '#tern/proof';
import type { AnswerToCheck } from './answer-checker.js';

/** AnswerChecker's thread: one check of libs/proof's verifyAnswer, off the scheduler's event loop. */
const { challenge, commitment, probe, answer } = workerData as AnswerToCheck;
parentPort!.postMessage(verifyAnswer(challenge, commitment, probe, answer));
