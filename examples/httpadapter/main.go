// Command mailspool is the mailspool command with one more transport
// adapter, postmark://, written outside the mailspool module. Build it
// with "go build -o mailspool ." in this directory.
package main

import (
	"context"
	"os"

	"example.com/httpadapter/postmark"
	"github.com/mailspool/mailspool/cli"
	"github.com/mailspool/mailspool/config"
)

func main() {
	mux := config.Transports() // the adapters mailspool ships
	mux.Register(postmark.Scheme, postmark.URLOpener{})
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Options{Transports: mux}))
}
