package main

import (
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the command-line scripts of testdata/script: each runs
// the real mailspool command (TestMain) in a fresh directory, on SQLite,
// and checks its output and exit status. They include the commands shown
// in README.md and docs/OPERATIONS.md, so that the docs are executed.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("MAILSPOOL_DATABASE", "sqlite:"+env.WorkDir+"/mailspool.db")
			return nil
		},
	})
}
