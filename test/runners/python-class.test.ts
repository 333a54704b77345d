import { RunnerProcess } from './runner-process.js';

/**
 * A class as the handler (`app.py:Model.run`), as the SDK's class decorators emit it: one
 * instance per container, its @tern.enter methods run once before /health is 200.
 */
const APP = `
import asyncio, os, time
import tern

events = []
made = [0]

def fetch():
    events.append("on_start")

class Base:
    @tern.enter
    def first(self):
        events.append("base enter")

@tern.endpoint()
class Model(Base):
    LABEL = "model"

    def __init__(self):
        made[0] += 1
        self.id = id(self)

    @tern.enter
    def load(self):
        time.sleep(float(os.environ.get("LOAD_SECONDS", "0")))
        if os.environ.get("FAIL_ENTER"):
            raise RuntimeError("weights missing: " + os.environ["FAIL_ENTER"])
        events.append("load")
        self.loaded_in = os.getpid()

    @tern.enter()
    async def warm(self):
        await asyncio.sleep(0.05)
        events.append("warm")
        self.warm = True

    @tern.method
    def run(self, p):
        if p.get("sleep"):
            time.sleep(p["sleep"])
        return {"echo": p, "events": events, "made": made[0], "label": Model.LABEL, "instance": self.id, "loaded_in": self.loaded_in, "pid": os.getpid(), "warm": self.warm}

@tern.endpoint()
class Streamer:
    @tern.enter
    def load(self):
        self.prefix = "item"

    def stream(self, p):
        for i in range(p.get("n", 3)):
            yield {"item": f"{self.prefix}-{i}"}

class Plain:
    def __init__(self):
        self.calls = 0

    async def run(self, p):
        self.calls += 1
        return {"calls": self.calls}
`;

async function ndjson(res: Response): Promise<unknown[]> {
  return (await res.text())
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as unknown);
}

describe('python runner: a class as the handler', () => {
  let runner: RunnerProcess | undefined;
  const start = (env: Record<string, string>) => (runner = new RunnerProcess('python', { 'app.py': APP })).start(env);

  afterEach(async () => {
    await runner?.stop();
    runner = undefined;
  });

  it('makes one instance and runs each enter method once, after on_start, while /health is 503', async () => {
    const r = await start({ TERN_HANDLER: 'app.py:Model.run', TERN_ON_START: 'app.py:fetch', LOAD_SECONDS: '1.5' });
    await r.waitForHealth(503);
    expect((await r.post('{}')).status).toBe(503);
    await r.waitForHealth(200);
    const answers = [];
    for (let i = 0; i < 4; i++) {
      const res = await r.post(JSON.stringify({ i }));
      expect(res.status).toBe(200);
      answers.push((await res.json()) as Record<string, unknown>);
    }
    for (const a of answers) {
      // Base classes' enter methods first; the async one awaited.
      expect(a).toMatchObject({ events: ['on_start', 'base enter', 'load', 'warm'], made: 1, warm: true, label: 'model' });
    }
    expect(new Set(answers.map((a) => a.instance)).size).toBe(1);
    expect(answers[3].echo).toEqual({ i: 3 });
    await r.waitForOutput('stdout', /enter Model\.load done in 1\.\d\ds/);
  });

  it('makes the instance once per container, before the workers fork, and they share it', async () => {
    const r = await start({ TERN_HANDLER: 'app.py:Model.run', TERN_WORKERS: '2' });
    await r.waitForHealth(200);
    const answers = (await Promise.all([r.postFresh('{"sleep":0.5}'), r.postFresh('{"sleep":0.5}')])).map((a) => a.json);
    expect(new Set(answers.map((a) => a.pid)).size).toBe(2);
    for (const a of answers) expect(a).toMatchObject({ made: 1, events: ['base enter', 'load', 'warm'] });
    // Loaded in the parent: one pid, neither worker's.
    expect(new Set(answers.map((a) => a.loaded_in)).size).toBe(1);
    expect(answers.map((a) => a.pid)).not.toContain(answers[0].loaded_in);
  });

  it('fails the start when an enter method raises, saying why, and never answers 200', async () => {
    const r = await start({ TERN_HANDLER: 'app.py:Model.run', FAIL_ENTER: 'model.bin' });
    const [code] = await r.exit();
    expect(code).toBe(1);
    expect(r.stderr).toContain('tern-runner: start-up failed');
    expect(r.stderr).toContain('RuntimeError: weights missing: model.bin');
    expect(r.stdout).not.toContain('serving app.py:Model.run');
  });

  it("streams a generator method, serves a decorated class named without its method, and a plain class's async method", async () => {
    const streamer = await start({ TERN_HANDLER: 'app.py:Streamer.stream' });
    await streamer.waitForHealth(200);
    expect(await ndjson(await streamer.post('{"n":2}'))).toEqual([{ item: 'item-0' }, { item: 'item-1' }]);
    await streamer.stop();

    // The SDK's handle on the class knows its method (Streamer's only public one).
    const named = await start({ TERN_HANDLER: 'app.py:Streamer' });
    await named.waitForHealth(200);
    expect(await ndjson(await named.post('{"n":1}'))).toEqual([{ item: 'item-0' }]);
    await named.stop();

    const plain = await start({ TERN_HANDLER: 'app.py:Plain.run' });
    await plain.waitForHealth(200);
    expect(await (await plain.post('{}')).json()).toEqual({ calls: 1 });
    expect(await (await plain.post('{}')).json()).toEqual({ calls: 2 });
  });
});
