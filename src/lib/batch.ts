/**
 * Groups concurrent calls (group commit): calls made while groups are being handled wait, and go
 * together in the next group (at most `maxItems`, at most `concurrency` groups at a time). A group
 * starts once the calls already received (this turn of the event loop: setImmediate) have joined it,
 * so that a burst of requests read together is one group, not a group of one and the rest. Each call gets its own item's outcome, after its group is
 * handled: `handle` answers item by item, or throws, and then every call of the group gets that error.
 */
export type Outcome<O> = { ok: true; value: O } | { ok: false; error: unknown };

export function batcher<I, O>(
  handle: (items: I[]) => Promise<Outcome<O>[]>,
  o: { maxItems: number; concurrency?: number },
): (item: I) => Promise<O> {
  const concurrency = o.concurrency ?? 1;
  const waiting: { item: I; resolve: (v: O) => void; reject: (e: unknown) => void }[] = [];
  let running = 0;
  let scheduled = false;
  const pump = () => {
    while (running < concurrency && waiting.length > 0) {
      const group = waiting.splice(0, o.maxItems);
      running++;
      handle(group.map((g) => g.item))
        .then(
          (outcomes) =>
            group.forEach((g, i) => {
              const r = outcomes[i];
              if (r?.ok) g.resolve(r.value);
              else g.reject(r ? r.error : new Error('batch: no outcome for this item'));
            }),
          (err: unknown) => group.forEach((g) => g.reject(err)),
        )
        .finally(() => {
          running--;
          pump();
        });
    }
  };
  return (item) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      if (scheduled || running >= concurrency) return;
      scheduled = true;
      setImmediate(() => {
        scheduled = false;
        pump();
      });
    });
}
