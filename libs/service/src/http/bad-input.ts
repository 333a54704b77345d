import { isUtf8 } from 'node:buffer';

/**
 * What is wrong with a request's text before any handler sees it: a NUL byte or bytes that are
 * not UTF-8 in a path segment or a query parameter, a NUL, a lone surrogate or nesting past a
 * bound in a JSON body. Postgres refuses all of these deep inside a query, too late to say
 * which part of the request was wrong; here the answer names it. Framework-free: the hooks in
 * request-intake.ts turn an answer into a 400.
 */

/** Deeper than this a JSON body is refused: nothing the API takes nests past a few levels, and recursion on it is unbounded. */
export const MAX_JSON_DEPTH = 64;

/** A high surrogate without a low one after it, or a low one without a high one before it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The problem with a URL's path segments and query parameters (as sent, percent-encoded), or undefined. */
export function urlInputProblem(url: string): string | undefined {
  // Only a percent escape can hide a NUL or a non-UTF-8 byte (see textProblem): most URLs stop here.
  if (!url.includes('%')) return undefined;
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const problem = textProblem(segments[i]!);
    if (problem) return `path segment ${i} ${problem}`;
  }
  if (q < 0) return undefined;
  for (const pair of url.slice(q + 1).split('&')) {
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    const nameProblem = textProblem(name);
    if (nameProblem) return `a query parameter name ${nameProblem}`;
    const valueProblem = eq < 0 ? undefined : textProblem(pair.slice(eq + 1));
    if (valueProblem) return `query parameter ${quoted(name)} ${valueProblem}`;
  }
  return undefined;
}

/**
 * The path segment with a `%` that starts no percent escape (`%zz`, a trailing `%`), named, or
 * undefined. Fastify's router refuses such a path before any hook runs (answerFrameworkError);
 * this says which segment and what to write instead.
 */
export function pathEscapeProblem(url: string): string | undefined {
  const q = url.indexOf('?');
  const segments = (q < 0 ? url : url.slice(0, q)).split('/');
  for (let i = 1; i < segments.length; i++) {
    const stray = /%(?![0-9a-fA-F]{2}).{0,2}/s.exec(segments[i]!);
    if (stray) return `path segment ${i} has a % that starts no percent escape (${JSON.stringify(stray[0])}); write a literal % as %25`;
  }
  return undefined;
}

/** The problem with a request body's bytes as UTF-8 text, or undefined. */
export function bodyTextProblem(body: Buffer): string | undefined {
  if (body.includes(0)) return 'request body contains a NUL byte; remove it';
  return isUtf8(body) ? undefined : 'request body is not valid UTF-8; send JSON as UTF-8 text';
}

/**
 * The problem with a parsed JSON body (keys and values at any depth), or undefined. Walks with
 * its own stack, so a deep body cannot overflow the call stack here.
 */
export function jsonValueProblem(value: unknown): string | undefined {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value, path: '', depth: 0 }];
  while (stack.length) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      const problem = stringProblem(value);
      if (problem) return `${path ? `body field ${path}` : 'body'} ${problem}`;
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (depth >= MAX_JSON_DEPTH) return `body nests deeper than ${MAX_JSON_DEPTH} levels; flatten it`;
    if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push({ value: item, path: `${path}[${i}]`, depth: depth + 1 }));
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      const problem = stringProblem(key);
      if (problem) return `a key in body${path ? ` field ${path}` : ''} ${problem}`;
      stack.push({ value: item, path: path ? `${path}.${key}` : key, depth: depth + 1 });
    }
  }
  return undefined;
}

function stringProblem(s: string): string | undefined {
  if (s.includes('\u0000')) return 'contains a NUL character (\\u0000); remove it';
  if (LONE_SURROGATE.test(s)) return 'contains a lone UTF-16 surrogate (\\ud800-\\udfff without its pair); send well-formed Unicode';
  return undefined;
}

/** `text` is percent-encoded (a path segment or a query name or value). */
function textProblem(text: string): string | undefined {
  if (!text.includes('%')) return undefined;
  const bytes = percentDecode(text);
  if (bytes.includes(0)) return 'contains a NUL byte (%00); remove it';
  if (!isUtf8(bytes)) return 'is not valid UTF-8 once percent-decoded; percent-encode the UTF-8 bytes of the text';
  return undefined;
}

function percentDecode(text: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const hex = text[i] === '%' ? text.slice(i + 1, i + 3) : '';
    if (/^[0-9a-fA-F]{2}$/.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else {
      // Node refuses non-ASCII bytes in a request line, so every other character is one byte.
      bytes.push(text.charCodeAt(i) & 0xff);
    }
  }
  return Buffer.from(bytes);
}

function quoted(name: string): string {
  return JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}…` : name);
}
