// Package backend owns the upstream side of the gateway: connection pools to
// backend addresses that survive config reloads, dialing with connect timeouts and
// TCP keepalives, the static and dynamic backend kinds, weighted selection, and the
// mapping of upstream failures to HTTP statuses.
package backend
