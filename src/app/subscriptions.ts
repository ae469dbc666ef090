/**
 * Subscriptions (SubscribeSurface, SubscribeEvents) without any transport, in three files:
 * subscription.ts (the catch-up/live state machine), subscription-sources.ts (catch-up from the
 * store and live batches from the change feed), subscription-items.ts (what is handed out).
 */
export { NO_CURSOR, eventItemsOf, surfaceItems, surfaceItemsOf, type EventItem, type Item, type SurfaceItem } from './subscription-items.js';
export { eventSource, surfaceSource, type CatchUp, type ItemSource } from './subscription-sources.js';
export { IDLE, Subscription, type SubscriptionConsumer, type SubscriptionOptions, type SubscriptionStats } from './subscription.js';
export { SurfaceTracker } from '../domain/surface-fold.js';
