import { Virtualizer, elementScroll, observeElementOffset, observeElementRect } from '@tanstack/virtual-core';
import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useReducer, useRef, useState } from 'preact/hooks';

/**
 * A scrolling list that renders only the rows in view (@tanstack/virtual-core), so thousands of
 * rows cost what a screenful does. Rows are measured after render (variable heights).
 */
export function VirtualList<T>(props: {
  items: readonly T[];
  estimate: number;
  row: (item: T, index: number) => ComponentChildren;
  itemKey: (item: T, index: number) => string | number;
  label: string;
  /** Keep the view at the bottom while new rows arrive (unless the user scrolled up). */
  follow?: boolean;
  height?: string;
}) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const [virtualizer] = useState(
    () =>
      new Virtualizer<HTMLDivElement, Element>({
        count: props.items.length,
        getScrollElement: () => scrollRef.current,
        estimateSize: () => props.estimate,
        scrollToFn: elementScroll,
        observeElementRect,
        observeElementOffset,
        onChange: () => rerender(0),
        overscan: 8,
      }),
  );
  const atBottom = useRef(true);
  virtualizer.setOptions({
    ...virtualizer.options,
    count: props.items.length,
    getItemKey: (i) => props.itemKey(props.items[i]!, i),
    estimateSize: () => props.estimate,
  });
  useLayoutEffect(() => virtualizer._didMount(), []);
  useLayoutEffect(() => virtualizer._willUpdate());
  useEffect(() => {
    if (props.follow && atBottom.current && props.items.length > 0) virtualizer.scrollToIndex(props.items.length - 1, { align: 'end' });
  }, [props.items.length]);
  const onScroll = () => {
    const el = scrollRef.current;
    if (el) atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  };
  return (
    <div ref={scrollRef} class="vlist" role="list" aria-label={props.label} tabIndex={0} style={{ height: props.height ?? '60vh' }} onScroll={onScroll}>
      <div style={{ height: `${virtualizer.getTotalSize()}px`, position: 'relative', width: '100%' }}>
        {virtualizer.getVirtualItems().map((v) => (
          <div
            key={v.key}
            role="listitem"
            data-index={v.index}
            ref={(el) => {
              if (el) virtualizer.measureElement(el);
            }}
            style={{ position: 'absolute', top: 0, left: 0, width: '100%', transform: `translateY(${v.start}px)` }}
          >
            {props.row(props.items[v.index]!, v.index)}
          </div>
        ))}
      </div>
    </div>
  );
}
