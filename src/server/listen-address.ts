/** A listen address ("HOST:PORT", "[::1]:PORT") as host and port; throws a clear error otherwise. */
export function splitHostPort(addr: string, what = 'listen address'): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  if (i < 0) throw new Error(`${what} ${JSON.stringify(addr)} must be host:port`);
  const portText = addr.slice(i + 1);
  const port = Number(portText);
  if (!/^[0-9]+$/.test(portText) || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port in ${JSON.stringify(addr)}`);
  return { host: addr.slice(0, i).replace(/^\[|\]$/g, ''), port };
}
