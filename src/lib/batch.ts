/**
 * Groups concurrent calls (group commit): the first call starts a group of one at once; calls that
 * arrive while groups are being handled wait, and go together in the next group (at most `maxItems`,
 * at most `concurrency` groups at a time). Each call gets its own item's outcome, after its group is
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
      pump();
    });
}
