"""An OpenAI-compatible server with a stand-in model, in Python's standard library.

It answers what vLLM, TGI, SGLang or llama.cpp's server answer (GET /v1/models, POST
/v1/completions and /v1/chat/completions, streamed as server-sent events with `stream: true`),
so the official `openai` clients drive it unchanged. The "model" echoes the prompt's words one
token at a time, at TOKEN_DELAY seconds a token, as a real one produces them.

Two knobs no real server has, to show how Tern treats slow streams (request body fields):
`delay` (seconds per token, instead of TOKEN_DELAY) and `stall_after` + `stall` (after that
many tokens, say nothing for that many seconds).
"""
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = os.environ.get('MODEL_NAME', 'tern-echo')
TOKEN_DELAY = float(os.environ.get('TOKEN_DELAY', '0.05'))
STARTED = int(time.time())

lock = threading.Lock()
stats = {'active': 0, 'served': 0, 'disconnected': 0}


def log(message):
    # One line per event, flushed at once: `tern logs` shows it as it happens.
    print(f'{time.time():.3f} {message}', file=sys.stderr, flush=True)


def count(key, by=1):
    with lock:
        stats[key] += by


def prompt_of(body, chat):
    if chat:
        messages = body.get('messages') or []
        text = messages[-1].get('content', '') if messages else ''
        return text if isinstance(text, str) else ' '.join(p.get('text', '') for p in text if isinstance(p, dict))
    prompt = body.get('prompt', '')
    return prompt if isinstance(prompt, str) else ' '.join(map(str, prompt))


def tokens(prompt, n):
    words = prompt.split() or ['…']
    return [(' ' if i else '') + words[i % len(words)] for i in range(n)]


class Disconnected(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        if self.path == '/health':
            return self.json(200, {'status': 'ok'})
        if self.path == '/v1/models':
            return self.json(200, {'object': 'list', 'data': [{'id': MODEL, 'object': 'model', 'created': STARTED, 'owned_by': 'tern'}]})
        if self.path == '/stats':
            with lock:
                return self.json(200, dict(stats))
        self.json(404, {'error': {'message': f'no route GET {self.path}', 'type': 'invalid_request_error', 'code': 404}})

    def do_POST(self):
        chat = self.path == '/v1/chat/completions'
        if not chat and self.path != '/v1/completions':
            return self.json(404, {'error': {'message': f'no route POST {self.path}', 'type': 'invalid_request_error', 'code': 404}})
        try:
            body = json.loads(self.read_body() or b'{}')
        except ValueError as e:
            return self.json(400, {'error': {'message': f'the body is not JSON: {e}', 'type': 'invalid_request_error', 'code': 400}})
        if body.get('model') not in (None, MODEL):
            return self.json(404, {'error': {'message': f'model {body.get("model")!r} not found: this server has {MODEL!r}', 'type': 'invalid_request_error', 'code': 404}})
        words = tokens(prompt_of(body, chat), int(body.get('max_tokens') or 16))
        completion = {'id': ('chatcmpl-' if chat else 'cmpl-') + uuid.uuid4().hex[:24], 'created': int(time.time()), 'model': MODEL}
        count('active')
        try:
            if body.get('stream'):
                self.stream(body, chat, completion, words)
            else:
                self.whole(chat, completion, words)
            count('served')
        except (Disconnected, BrokenPipeError, ConnectionResetError):
            count('disconnected')
        finally:
            count('active', -1)

    def whole(self, chat, completion, words):
        text = ''.join(words)
        choice = {'index': 0, 'finish_reason': 'length'}
        choice.update({'message': {'role': 'assistant', 'content': text}} if chat else {'text': text, 'logprobs': None})
        usage = {'prompt_tokens': len(words), 'completion_tokens': len(words), 'total_tokens': 2 * len(words)}
        time.sleep(TOKEN_DELAY * len(words))
        self.json(200, dict(completion, object='chat.completion' if chat else 'text_completion', choices=[choice], usage=usage))

    def stream(self, body, chat, completion, words):
        delay = float(body.get('delay', TOKEN_DELAY))
        stall_after, stall = body.get('stall_after'), float(body.get('stall', 0))
        self.send_response(200)
        self.send_header('content-type', 'text/event-stream')
        self.send_header('cache-control', 'no-cache')
        self.send_header('transfer-encoding', 'chunked')
        self.end_headers()
        kind = 'chat.completion.chunk' if chat else 'text_completion'
        log(f'{completion["id"]}: streaming {len(words)} tokens')
        for i, word in enumerate(words):
            if i == stall_after:
                log(f'{completion["id"]}: stalling {stall} s after {i} tokens')
                time.sleep(stall)
            last = i == len(words) - 1
            choice = {'index': 0, 'finish_reason': 'length' if last else None}
            choice.update({'delta': {'content': word}} if chat else {'text': word, 'logprobs': None})
            self.event(dict(completion, object=kind, choices=[choice]), completion['id'], i)
            time.sleep(delay)
        self.chunk(b'data: [DONE]\n\n', completion['id'], len(words))
        self.chunk(b'', completion['id'], len(words))
        log(f'{completion["id"]}: done')

    def event(self, data, id, sent):
        self.chunk(b'data: ' + json.dumps(data).encode() + b'\n\n', id, sent)

    def chunk(self, data, id, sent):
        try:
            self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            # What a real server does when its client hangs up: stop generating, free the slot.
            log(f'{id}: client disconnected after {sent} tokens; stopped generating')
            raise Disconnected()

    def read_body(self):
        if self.headers.get('transfer-encoding', '').lower() == 'chunked':
            data = b''
            while True:
                size = int(self.rfile.readline().split(b';')[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get('content-length') or 0))

    def json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header('content-type', 'application/json')
        self.send_header('content-length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == '__main__':
    port = int(os.environ.get('PORT', '8000'))
    server = ThreadingHTTPServer(('0.0.0.0', port), Handler)
    server.daemon_threads = True
    log(f'serving {MODEL} on port {port}')
    server.serve_forever()
