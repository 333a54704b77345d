import type { Readable } from 'node:stream';
import { JSONParser } from '@streamparser/json';
import { TASK_PAYLOAD_MAX_BYTES } from '#tern/contracts';
import { ApiError, jsonValueProblem } from '#tern/service';

/** Inputs one map may have. */
export const MAX_MAP_INPUTS = 1_000_000;

/**
 * A map's inputs as they arrive, never the whole body at once: a JSON array (`[{…}, {…}]`) or
 * NDJSON (one JSON value per line), told apart by the first character. Bad JSON is a 400 naming
 * the input (or line); an input over the task payload limit a 413.
 */
export async function* readInputs(body: AsyncIterable<Buffer> & Readable): AsyncGenerator<unknown> {
  let format: 'array' | 'ndjson' | undefined;
  let parser: JSONParser | undefined;
  const parsed: unknown[] = [];
  let failure: Error | undefined;
  let pending = '';
  let line = 0;
  let count = 0;

  const ndjsonLine = (text: string) => {
    line++;
    if (!text.trim()) return;
    try {
      parsed.push(JSON.parse(text));
    } catch (e) {
      throw new ApiError(400, `line ${line} of the NDJSON body is not JSON: ${(e as Error).message}`);
    }
  };

  for await (const buf of body) {
    let text = buf.toString('utf8');
    if (!format) {
      const first = text.trimStart()[0];
      if (!first) continue;
      format = first === '[' ? 'array' : 'ndjson';
      if (format === 'array') {
        parser = new JSONParser({ paths: ['$.*'], keepStack: false });
        parser.onValue = ({ value }) => parsed.push(value);
        parser.onError = (e) => (failure ??= e);
      }
    }
    if (parser) {
      parser.write(text);
      if (failure)
        throw new ApiError(400, `the body is not a JSON array of inputs: ${failure.message} (after input ${count + parsed.length})`);
    } else {
      text = pending + text;
      const lines = text.split('\n');
      pending = lines.pop()!;
      if (Buffer.byteLength(pending) > TASK_PAYLOAD_MAX_BYTES) throw tooLarge(`line ${line + 1}`);
      for (const l of lines) ndjsonLine(l);
    }
    for (const value of parsed.splice(0)) yield checked(value, count++);
  }
  if (parser) {
    if (!parser.isEnded) parser.end();
    if (failure) throw new ApiError(400, `the body is not a complete JSON array of inputs: ${failure.message}`);
  } else {
    ndjsonLine(pending);
  }
  for (const value of parsed.splice(0)) yield checked(value, count++);
}

function checked(value: unknown, index: number): unknown {
  if (value === null) throw new ApiError(400, `input ${index} is null: each input is any other JSON value, the handler's argument`);
  if (index >= MAX_MAP_INPUTS) throw new ApiError(413, `a map takes at most ${MAX_MAP_INPUTS} inputs: split it into several maps`);
  if (Buffer.byteLength(JSON.stringify(value)) > TASK_PAYLOAD_MAX_BYTES) throw tooLarge(`input ${index}`);
  const problem = jsonValueProblem(value);
  if (problem) throw new ApiError(400, `input ${index}: ${problem}`);
  return value;
}

function tooLarge(what: string): ApiError {
  return new ApiError(
    413,
    `${what} is over the ${TASK_PAYLOAD_MAX_BYTES / 1024} KiB limit for one input: pass large inputs by reference (a URL or a volume)`,
  );
}
