/**
 * The subscribers of bench/feed.bench.ts, in a worker thread (issue #35): the per-session
 * SubscribeEvents streams and the SubscribeSessions streams, with their decoding, run beside the
 * server's event loop instead of in it, as clients on another machine would (100 feed subscribers
 * of 1,000 appends/s decode 100,000 changes/s: in the server's thread that measured the clients).
 * Arrival times are `performance.timeOrigin + performance.now()`, comparable across threads.
 *
 * Messages from the bench: 'feed' (open the feed subscribers), 'measure' / 'stop' (record
 * arrivals or not), 'collect' (post the arrivals, close everything). Posts 'ready' once every
 * per-session stream caught up, 'feedReady' once every feed stream did.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { credentials } from '@grpc/grpc-js';
import {
  SessionServiceClient, SubscribeEventsRequest, SubscribeSessionsRequest, type SubscribeEventsResponse, type SubscribeSessionsResponse,
} from '../gen/palimpsest/v1/service.js';

export interface FeedClientsData {
  readonly streamAddr: string;
  readonly feedAddr: string;
  readonly ids: readonly string[];
  readonly feedSubscribers: number;
  readonly channels: number;
  readonly batch: boolean;
}

type Arrival = [string, number];

const data = workerData as FeedClientsData;
const port = parentPort!;
const at = (): number => performance.timeOrigin + performance.now();
const opts = { 'grpc.use_local_subchannel_pool': 1 };
const streamClients = Array.from({ length: data.channels }, () => new SessionServiceClient(data.streamAddr, credentials.createInsecure(), opts));
const feedClients = data.feedAddr === data.streamAddr ? streamClients
  : Array.from({ length: data.channels }, () => new SessionServiceClient(data.feedAddr, credentials.createInsecure(), opts));
const calls: { cancel(): void }[] = [];
const streamArrivals: Arrival[] = [];
const feedArrivals: Arrival[] = [];
let feedMessages = 0;
let measuring = false;

let streamsUp = 0;
data.ids.forEach((id, s) => {
  const st = streamClients[s % data.channels]!.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: id }));
  calls.push(st);
  st.on('data', (m: SubscribeEventsResponse) => {
    if (m.kind?.$case === 'caughtUp' && ++streamsUp === data.ids.length) port.postMessage({ type: 'ready' });
    if (m.kind?.$case === 'event' && measuring) streamArrivals.push([`${id} ${m.kind.value.seq}`, at()]);
  });
  st.on('error', () => undefined);
});

function openFeed(): void {
  let up = 0;
  for (let f = 0; f < data.feedSubscribers; f++) {
    const st = feedClients[f % data.channels]!.subscribeSessions(SubscribeSessionsRequest.fromPartial({ fromNow: true, batch: data.batch }));
    calls.push(st);
    st.on('data', (m: SubscribeSessionsResponse) => {
      if (m.kind?.$case === 'caughtUp' && ++up === data.feedSubscribers) port.postMessage({ type: 'feedReady' });
      if (!measuring) return;
      const changes = m.kind?.$case === 'change' ? [m.kind.value] : m.kind?.$case === 'changes' ? m.kind.value.changes : [];
      if (changes.length === 0) return;
      const t = at();
      feedMessages++;
      for (const c of changes) if (c.kind === 4) feedArrivals.push([`${c.sessionId} ${c.headSeq}`, t]);
    });
    st.on('error', () => undefined);
  }
}

port.on('message', (m: string) => {
  if (m === 'feed') openFeed();
  else if (m === 'measure') measuring = true;
  else if (m === 'stop') measuring = false;
  else if (m === 'collect') {
    for (const c of calls) c.cancel();
    for (const c of new Set([...streamClients, ...feedClients])) c.close();
    port.postMessage({ type: 'arrivals', streamArrivals, feedArrivals, feedMessages });
    port.close();
  }
});
