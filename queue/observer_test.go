package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestJoinObserversCallsEachSetField(t *testing.T) {
	var got []string
	a := &Observer{ClaimFunc: func(e ClaimEvent) { got = append(got, "a claim "+e.Lane) }}
	b := &Observer{
		ClaimFunc:   func(e ClaimEvent) { got = append(got, "b claim "+e.Lane) },
		CleanupFunc: func(e CleanupEvent) { got = append(got, "b cleanup") },
	}
	o := JoinObservers(a, nil, b)
	o.ClaimFunc(ClaimEvent{Lane: "x"})
	o.CleanupFunc(CleanupEvent{})
	o.OutcomeFunc(OutcomeEvent{}) // nobody listens: no call, no panic
	assert.Equal(t, []string{"a claim x", "b claim x", "b cleanup"}, got)
}

func TestDomainOf(t *testing.T) {
	assert.Equal(t, "example.com", domainOf("Bob.Smith@EXAMPLE.com"))
	assert.Equal(t, "b.example", domainOf(`"a@b"@b.example`))
	assert.Equal(t, "", domainOf("nobody"))
}

func TestClaimInterval(t *testing.T) {
	// Defaults: batch 50, concurrency 8 → 8 rounds of 30 s, twice, plus
	// the 30 s margin and the 2 s poll.
	assert.Equal(t, 2*8*30*time.Second+32*time.Second, WorkerOptions{}.ClaimInterval())
	assert.Equal(t, 2*2*time.Second+30*time.Second+2*time.Second, WorkerOptions{Batch: 1, SendTimeout: time.Second}.ClaimInterval())
}

func TestRedactAddresses(t *testing.T) {
	assert.Equal(t, "550 5.1.1 <*@example.com>: Recipient address rejected", redactAddresses("550 5.1.1 <bob.smith+x@example.com>: Recipient address rejected"))
	assert.Equal(t, "to *@b.example, *@c.example.", redactAddresses("to a@b.example, x_y@c.example."))
	assert.Equal(t, "421 try later", redactAddresses("421 try later"))
}
