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
	// Defaults: batch 50, concurrency 8 → 7 rounds of 30 s, for two
	// batches, beats FailAfter (5m); plus the claim backoff and the poll.
	assert.Equal(t, 7*time.Minute+32*time.Second, WorkerOptions{}.ClaimInterval())
	assert.Equal(t, 5*time.Minute+32*time.Second, WorkerOptions{Batch: 8, SendTimeout: time.Second}.ClaimInterval(), "FailAfter bounds a batch whose outcomes wait for the database")
}

func TestRedactAddresses(t *testing.T) {
	assert.Equal(t, "550 5.1.1 <*@example.com>: Recipient address rejected", redactAddresses("550 5.1.1 <bob.smith+x@example.com>: Recipient address rejected"))
	assert.Equal(t, "to *@b.example, *@c.example.", redactAddresses("to a@b.example, x_y@c.example."))
	assert.Equal(t, "421 try later", redactAddresses("421 try later"))
}
