import { routeOf } from './calls.js';

describe('routeOf', () => {
  it("pins an endpoint's version with @<N>: after its name comes the server's own path, /v1 included", () => {
    expect(routeOf('endpoint', 'llm')).toBe('/endpoint/llm');
    expect(routeOf('endpoint', 'llm', 3)).toBe('/endpoint/llm@3');
  });

  it('keeps /v<N> for functions and task queues, which carry no path of their own', () => {
    expect(routeOf('function', 'fn', 2)).toBe('/function/fn/v2');
    expect(routeOf('taskqueue', 'jobs', 4)).toBe('/taskqueue/jobs/v4');
    expect(routeOf('taskqueue', 'jobs')).toBe('/taskqueue/jobs');
  });
});
