/**
 * The search benches' events (bench/search.mjs and its profiles): a user message, an assistant
 * message (one in five calls a tool, `bash` or `deploy`) and a tool result, ~30 words each from a
 * 5,000-word vocabulary, seeded so that every run writes the same data; "invoice 4711" in one
 * event in 1,000, "rm -rf /tmp/build" in one in 500, "quota exceeded" in one in 5,000.
 */
const VOCAB = Array.from({ length: 5000 }, (_, i) => `w${(i * 7919 % 99991).toString(36)}${'aeiou'[i % 5]}`);

/** A fresh generator (seed 42): `eventAt(seq, time)` gives the event at `seq` of the sequence. */
export function searchEvents() {
  let seed = 42;
  const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const words = (n) => Array.from({ length: n }, () => VOCAB[Math.floor(rand() * VOCAB.length)]).join(' ');
  let eventNo = 0;
  const text = () => {
    eventNo++;
    let t = words(30);
    if (eventNo % 1000 === 0) t += ' invoice 4711 is overdue';
    if (eventNo % 500 === 0) t += ' then rm -rf /tmp/build';
    if (eventNo % 5000 === 0) t += ' deploy failed: quota exceeded';
    return t;
  };
  return function eventAt(seq, time) {
    const k = seq % 3;
    if (k === 0) return { type: 'user/message', seq, time, data: { id: `u${seq}`, role: 'user', content: [{ type: 'text', text: text() }], source: { kind: 'user' } }, surfaceOp: 'append' };
    if (k === 1) {
      const content = [{ type: 'text', text: text() }];
      if (rand() < 0.2) content.push({ type: 'tool-call', id: `c${seq}`, name: rand() < 0.5 ? 'bash' : 'deploy', arguments: JSON.stringify({ command: words(5) }) });
      return { type: 'assistant/message', seq, time, data: { turn: 1, step: 1, message: { id: `a${seq}`, role: 'assistant', content, source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append' };
    }
    return {
      type: 'tool/result', seq, time,
      data: { turn: 1, step: 1, message: { id: `r${seq}`, role: 'user', source: { kind: 'tool', callId: `c${seq - 1}` }, content: [{ type: 'tool-result', toolCallId: `c${seq - 1}`, content: [{ type: 'text', text: text() }] }] } },
      surfaceOp: 'append',
    };
  };
}
