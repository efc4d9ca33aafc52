// Command mailspool runs the mailspool worker daemon and its operator
// commands. Run "mailspool help" for the list. The commands live in
// package cli, so that another module can build this binary with its own
// transport adapters (docs/ADAPTERS.md).
package main

import (
	"context"
	"os"

	"github.com/mailspool/mailspool/cli"
)

func main() { os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Options{})) }
