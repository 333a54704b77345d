import WebSocket from 'ws';

/** Sends each message over a WebSocket and collects one answer to each (text as text, binary as bytes). */
export function echo(url: string, headers: Record<string, string>, messages: (string | Buffer)[]): Promise<(string | Buffer)[]> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const answers: (string | Buffer)[] = [];
    ws.on('unexpected-response', (_req, res) => reject(new Error(`refused with ${res.statusCode}`)));
    ws.on('error', reject);
    ws.on('open', () => messages.forEach((m) => ws.send(m)));
    ws.on('message', (data: Buffer, binary) => {
      answers.push(binary ? data : data.toString('utf8'));
      if (answers.length === messages.length) ws.close();
    });
    ws.on('close', () => resolve(answers));
  });
}

/**
 * A WebSocket echo server in Python's standard library, to run inside a sandbox: it answers a
 * text message with `<request path> <text>` (so a test sees the path the server got), echoes
 * binary messages as they are, and answers a plain GET with `plain <path>`. Of the subprotocols a
 * client offers it takes the first, as a server that speaks them all would.
 */
export const WEBSOCKET_ECHO_SERVER = String.raw`
import base64, hashlib, socket, struct, sys, threading

GUID = b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11'

def frame(op, payload):
    n = len(payload)
    size = bytes([n]) if n < 126 else b'\x7e' + struct.pack('>H', n) if n < 65536 else b'\x7f' + struct.pack('>Q', n)
    return bytes([0x80 | op]) + size + payload

def serve(conn):
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return conn.close()
        data += chunk
    head = data.split(b'\r\n\r\n', 1)[0].decode()
    path = head.split(' ')[1]
    keys = [l.split(':', 1)[1].strip() for l in head.split('\r\n') if l.lower().startswith('sec-websocket-key:')]
    if not keys:
        body = ('plain ' + path).encode()
        conn.sendall(b'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\nconnection: close\r\n\r\n' % len(body) + body)
        return conn.close()
    accept = base64.b64encode(hashlib.sha1(keys[0].encode() + GUID).digest()).decode()
    offered = [l.split(':', 1)[1].split(',')[0].strip() for l in head.split('\r\n') if l.lower().startswith('sec-websocket-protocol:')]
    chosen = 'Sec-WebSocket-Protocol: %s\r\n' % offered[0] if offered else ''
    conn.sendall(('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n' % (accept, chosen)).encode())
    f = conn.makefile('rb')
    while True:
        first = f.read(2)
        if len(first) < 2:
            return conn.close()
        op, n = first[0] & 0x0f, first[1] & 0x7f
        if n == 126:
            n = struct.unpack('>H', f.read(2))[0]
        elif n == 127:
            n = struct.unpack('>Q', f.read(8))[0]
        mask = f.read(4)
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(f.read(n)))
        if op == 8:
            conn.sendall(frame(8, payload[:2]))
            return conn.close()
        if op == 9:
            conn.sendall(frame(10, payload))
        elif op == 1:
            conn.sendall(frame(1, (path + ' ' + payload.decode()).encode()))
        elif op == 2:
            conn.sendall(frame(2, payload))

server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(('0.0.0.0', int(sys.argv[1])))
server.listen(16)
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
`;
