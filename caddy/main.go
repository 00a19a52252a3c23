// Command caddy is inferry's gateway: Caddy's standard build plus the limits module (caddy/limits).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "inferry.dev/caddy/limits"
)

func main() {
	caddycmd.Main()
}
