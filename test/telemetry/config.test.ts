import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { tracesUrl } from '../../src/telemetry/traces.js';

// Where traces go, as an operator sets it: OpenTelemetry's own variables, or the config keys.

const urlFor = (env: Record<string, string>) => tracesUrl(loadConfig([], env).telemetry);

describe('the traces endpoint', () => {
  it('is off with nothing set, whatever other OTEL_* variables say', () => {
    expect(urlFor({})).toBeUndefined();
    expect(urlFor({ OTEL_SERVICE_NAME: 'gw', OTEL_EXPORTER_OTLP_HEADERS: 'x=1' })).toBeUndefined();
  });

  it.each([
    ['http://collector:4318', 'http://collector:4318/v1/traces'],
    ['http://collector:4318/', 'http://collector:4318/v1/traces'],
    ['https://otlp.example/prefix', 'https://otlp.example/prefix/v1/traces'],
  ])('OTEL_EXPORTER_OTLP_ENDPOINT=%s is a base URL: traces go to %s', (base, url) => {
    expect(urlFor({ OTEL_EXPORTER_OTLP_ENDPOINT: base })).toBe(url);
  });

  it('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is, and wins', () => {
    expect(urlFor({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:9999/traces' })).toBe(
      'http://b:9999/traces',
    );
  });

  it('a value that is not an http(s) URL fails at start, at its key and variable', () => {
    try {
      loadConfig([], { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems).toEqual([
        expect.stringMatching(/^telemetry\.otlpEndpoint \(from OTEL_EXPORTER_OTLP_ENDPOINT\): /),
      ]);
    }
  });
});
