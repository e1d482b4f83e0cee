import { count, percent } from '../format.ts';

// A compact bar of counts (statuses, liveness) with a legend that carries every number in words,
// so the bar is a picture of the legend, not the only place a number is.

export type Part = Readonly<{ key: string; label: string; value: number; glyph: string; className: string; href?: string }>;

export function StackedBar({ title, parts, total }: { title: string; parts: readonly Part[]; total: number }) {
  const summary = parts.map((p) => `${p.label} ${count(p.value)}`).join(', ');
  return (
    <figure class="stacked">
      <figcaption>{title}</figcaption>
      <div class="bar" role="img" aria-label={`${title}: ${summary} of ${count(total)}`}>
        {parts
          .filter((p) => p.value > 0)
          .map((p) => (
            <span
              key={p.key}
              class={`seg ${p.className}`}
              style={{ width: `${(100 * p.value) / Math.max(1, total)}%` }}
              title={`${p.label}: ${count(p.value)}`}
            />
          ))}
      </div>
      <ul class="legend">
        {parts.map((p) => (
          <li key={p.key} data-part={p.key}>
            <span class={`swatch ${p.className}`} aria-hidden="true">
              {p.glyph}
            </span>{' '}
            {p.href === undefined ? p.label : <a href={p.href}>{p.label}</a>} <strong>{count(p.value)}</strong>{' '}
            <span class="muted">{percent(p.value, total)}</span>
          </li>
        ))}
      </ul>
    </figure>
  );
}
