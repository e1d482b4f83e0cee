import { useEffect, useRef, useState } from 'preact/hooks';
import { parseAtInput, time } from '../format.ts';

// "As of": one compact bar with a slider over store positions (or over one node's events), Live, a
// field for an exact ISO time or position, and what the page shows. Dragging asks for at most one moment per animation frame;
// the page keeps showing the previous answer until the next arrives.

export type TimeTravelProps = Readonly<{
  id: string;
  /** The positions the slider steps through (one node's events), or a range of positions (the fleet). */
  stops: readonly string[] | { min: number; max: number };
  /** The `at` shown (an ISO time or a position); null: live. */
  at: string | null;
  onChange: (at: string | null) => void;
  /** The moment the data on screen is as of, when not live. */
  shownMoment: string | null;
  shownPosition: string | null;
  busy: boolean;
}>;

export function TimeTravel({ id, stops, at, onChange, shownMoment, shownPosition, busy }: TimeTravelProps) {
  const ranged = !Array.isArray(stops);
  const list = Array.isArray(stops) ? (stops as readonly string[]) : null;
  const range = ranged ? (stops as { min: number; max: number }) : null;
  const max = list !== null ? Math.max(0, list.length - 1) : range!.max;
  const min = list !== null ? 0 : range!.min;
  const positionOf = (v: number): string => (list !== null ? (list[v] ?? '0') : String(v));
  const valueOf = (a: string | null): number => {
    if (a === null || !/^\d+$/.test(a)) return max;
    if (list !== null) {
      // the last stop at or before the position
      let best = 0;
      list.forEach((p, i) => {
        if (BigInt(p) <= BigInt(a)) best = i;
      });
      return best;
    }
    return Math.min(max, Math.max(min, Number(a)));
  };
  const [slider, setSlider] = useState(valueOf(at));
  const [text, setText] = useState(at ?? '');
  const [invalid, setInvalid] = useState(false);
  const frame = useRef<number | null>(null);
  useEffect(() => {
    setSlider(valueOf(at));
    setText(at ?? '');
  }, [at, max]);

  const pick = (v: number): void => {
    setSlider(v);
    if (frame.current !== null) cancelAnimationFrame(frame.current);
    frame.current = requestAnimationFrame(() => {
      frame.current = null;
      onChange(positionOf(v));
    });
  };
  const step = list !== null ? 1 : Math.max(1, Math.round((max - min) / 400));
  const live = at === null;
  return (
    <section class="timetravel" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`}>Time travel</h2>
      <label for={`${id}-slider`} class="sr-only">
        As of {list !== null ? 'event' : 'position'}
      </label>
      <input
        id={`${id}-slider`}
        type="range"
        min={min}
        max={max}
        step={step}
        value={slider}
        disabled={max <= min}
        aria-valuetext={live ? 'live' : `position ${positionOf(slider)}${shownMoment === null ? '' : `, ${time(shownMoment)}`}`}
        onInput={(e) => pick(Number((e.currentTarget as HTMLInputElement).value))}
      />
      <button type="button" class={live ? 'pressed' : ''} aria-pressed={live} onClick={() => onChange(null)}>
        Live
      </button>
      <form
        class="tt-at"
        onSubmit={(e) => {
          e.preventDefault();
          const parsed = parseAtInput(text);
          setInvalid(parsed === null);
          if (parsed !== null) onChange(parsed);
        }}
      >
        <label for={`${id}-at`} class="sr-only">
          As of time or position
        </label>
        <input
          id={`${id}-at`}
          type="text"
          inputMode="text"
          placeholder="2026-11-29T14:03:00Z or 1234"
          title="An ISO 8601 time or a store position"
          value={text}
          aria-invalid={invalid}
          aria-describedby={`${id}-help`}
          onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)}
        />
        <button type="submit">Show</button>
      </form>
      <p class="tt-shown" role="status" data-testid={`${id}-shown`}>
        {live ? (
          <span>
            <strong>Live</strong>: the present
          </span>
        ) : (
          <span>
            <strong>As of</strong> position {shownPosition ?? '—'}
            {shownMoment === null ? '' : `, ${time(shownMoment)}`}
            {busy ? ' …' : ''}
          </span>
        )}
      </p>
      {/* Said only when wrong, so the bar stays one line; the placeholder shows the two forms. */}
      <p id={`${id}-help`} class={invalid ? 'error tt-help' : 'sr-only'}>
        {invalid
          ? 'Not an ISO 8601 time (2026-11-29T14:03:00Z) nor a store position (a whole number).'
          : 'An ISO 8601 time or a store position.'}
      </p>
    </section>
  );
}
