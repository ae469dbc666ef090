/**
 * The event types the search index covers, as an SQL list (`'user/message', …`), for both stores'
 * queries. Migrations keep their own frozen copies.
 */
import { SEARCH_EVENT_TYPES } from '../domain/search-text.js';

export const SEARCH_TYPES_SQL = [...SEARCH_EVENT_TYPES].map((t) => `'${t}'`).join(', ');
