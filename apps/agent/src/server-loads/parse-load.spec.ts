import { REPORTED_LOAD_CAP } from '#tern/autoscaling';
import { parseServerLoad } from './parse-load.js';

describe('parseServerLoad', () => {
  it.each([
    ['{"load": 12.5}', 12.5],
    ['7', 7],
    ['{"load": 0}', 0],
  ])('reads %s as %p', (body, load) => {
    expect(parseServerLoad(body)).toBe(load);
  });

  it.each(['{"load": -1}', '{"load": "3"}', '{"queued": 3}', 'null', 'not json', '', '{"load": 1e999}'])(
    'finds nothing usable in %s',
    (body) => {
      expect(parseServerLoad(body)).toBeUndefined();
    },
  );

  it('caps a huge load', () => {
    expect(parseServerLoad('{"load": 1e300}')).toBe(REPORTED_LOAD_CAP);
  });

  const metrics = [
    '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
    '# TYPE vllm:num_requests_waiting gauge',
    'vllm:num_requests_waiting{model_name="llama"} 3.0',
    'vllm:num_requests_waiting{model_name="mistral",engine="0"} 2',
    'vllm:num_requests_waiting_total 99',
    'vllm:num_requests_running{model_name="llama"} 8',
    'plain_gauge 4 1712345678000',
    'bad_gauge{a="b"} NaN',
  ].join('\n');

  it('sums the samples of the named Prometheus metric, and only that one', () => {
    expect(parseServerLoad(metrics, 'vllm:num_requests_waiting')).toBe(5);
    expect(parseServerLoad(metrics, 'vllm:num_requests_running')).toBe(8);
    expect(parseServerLoad(metrics, 'plain_gauge')).toBe(4);
  });

  it('finds nothing when the metric is missing or not a number', () => {
    expect(parseServerLoad(metrics, 'vllm:gpu_cache_usage_perc')).toBeUndefined();
    expect(parseServerLoad(metrics, 'bad_gauge')).toBeUndefined();
    expect(parseServerLoad('{"load": 3}', 'vllm:num_requests_waiting')).toBeUndefined();
  });
});
