/**
 * A Python module that tries a TCP connection to each `host:port` given, all at once with a
 * 2 s timeout each, and answers one object: target → `open`, or why not (`timed out`,
 * `Connection refused`, `Network is unreachable`, …). As a handler (`probe.py:predict`) it
 * takes `{"targets": [...]}`; as a program, a JSON list as its first argument, and prints the
 * answer.
 */
export const PROBE_MODULE = `
import json, socket, sys, threading

def probe_all(targets):
    out = {}
    def probe(t):
        host, port = t.rsplit(':', 1)
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect((host, int(port)))
            out[t] = 'open'
        except OSError as e:
            out[t] = e.strerror or str(e) or type(e).__name__
        finally:
            s.close()
    threads = [threading.Thread(target=probe, args=(t,)) for t in targets]
    for th in threads: th.start()
    for th in threads: th.join()
    return out

def predict(inputs):
    return probe_all(inputs["targets"])

if __name__ == "__main__":
    print(json.dumps(probe_all(json.loads(sys.argv[1]))), flush=True)
`;
