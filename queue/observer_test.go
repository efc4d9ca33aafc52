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
	// Defaults: two batches of 2 s to start their rows plus a 30 s send
	// each stay under FailAfter (5m), which bounds a batch whose outcomes
	// wait for the database; plus the claim backoff and the poll. The
	// batch size no longer matters: rows not started in 2 s go back.
	assert.Equal(t, 5*time.Minute+32*time.Second, WorkerOptions{}.ClaimInterval())
	assert.Equal(t, 5*time.Minute+32*time.Second, WorkerOptions{Batch: 500, Concurrency: 1}.ClaimInterval())
	assert.Equal(t, 2*(2*time.Second+5*time.Minute)+32*time.Second, WorkerOptions{SendTimeout: 5 * time.Minute}.ClaimInterval(), "slow sends bound it")
}

func TestRedactAddresses(t *testing.T) {
	assert.Equal(t, "550 5.1.1 <*@example.com>: Recipient address rejected", redactAddresses("550 5.1.1 <bob.smith+x@example.com>: Recipient address rejected"))
	assert.Equal(t, "to *@b.example, *@c.example.", redactAddresses("to a@b.example, x_y@c.example."))
	assert.Equal(t, "421 try later", redactAddresses("421 try later"))
}
