// The OTLP/HTTP traces URL from the standard OpenTelemetry variables.

/** Where spans go, as the standard variables say (the collector's default when neither is set). */
export function tracesEndpoint(env: NodeJS.ProcessEnv): string {
  const traces = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']?.trim();
  if (traces) return traces;
  const base = env['OTEL_EXPORTER_OTLP_ENDPOINT']?.trim();
  if (base) return `${base.replace(/\/+$/, '')}/v1/traces`;
  return 'http://localhost:4318/v1/traces';
}
