/**
 * The CLI's and the tests' decoding of google.rpc.Status details: the @palimpsest/client
 * package's (clients/typescript), so the two never differ.
 */
export * from '../../clients/typescript/src/error-details.js';
