// Package config owns the gateway's configuration as users write it: the
// standalone file format (agentgateway's local config, schema/config.json),
// environment expansion, strict decoding into typed values, and validation
// whose every error names the exact field path. It knows nothing of the
// running gateway; the server package compiles a File into a snapshot.
package config
