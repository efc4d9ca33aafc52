package fake_test

import (
	"testing"

	"github.com/mailspool/mailspool/conformance"
)

func TestConformance(t *testing.T) {
	conformance.RunTransportTests(t, newHarness)
}
