/** A request URL's path: `/v1/models?key=k` is `/v1/models`. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** A request URL's query, with its `?`: `/v1/models?key=k` is `?key=k`; '' when it has none. */
export function queryOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? '' : url.slice(q);
}
