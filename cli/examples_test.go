package cli

import (
	"os"
	"os/exec"
	"testing"
)

// TestExampleAdapterModule builds, vets and tests examples/httpadapter, a
// module of its own (a replace points it at this repository): a Postmark
// adapter passes the conformance suite from outside this module, and its
// ten-line main builds a mailspool binary that runs send-test and worker
// with it. It needs no network: the example's go.mod and go.sum list
// what this module's do, and the module cache holds them.
func TestExampleAdapterModule(t *testing.T) {
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = "../examples/httpadapter"
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v in examples/httpadapter: %v\n%s", args, err, out)
		}
	}
}
