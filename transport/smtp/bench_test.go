package smtp_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport/smtp"
)

// Run with -benchtime=1000x to send 1 000 messages per benchmark; see
// docs/BENCHMARKS.md.

func BenchmarkSendReuse(b *testing.B) { benchmarkSend(b, script{tls: noTLS}, true) }

// BenchmarkSendReuseRTT is BenchmarkSendReuse with every reply arriving
// 1 ms late, as from a relay a millisecond away: the time per mail counts
// the round trips of a mail on a reused connection.
func BenchmarkSendReuseRTT(b *testing.B) {
	benchmarkSend(b, script{tls: noTLS, delay: time.Millisecond}, true)
}

func BenchmarkSendNewConnection(b *testing.B) { benchmarkSend(b, script{tls: noTLS}, false) }

func BenchmarkSendReuseSTARTTLS(b *testing.B) {
	benchmarkSend(b, script{auth: []string{"PLAIN"}}, true)
}

func BenchmarkSendNewConnectionSTARTTLS(b *testing.B) {
	benchmarkSend(b, script{auth: []string{"PLAIN"}}, false)
}

// benchmarkSend sends b.N messages to a test server following sc, on one
// transport (reuse) or on a new transport, and so a new connection, for
// each message.
func benchmarkSend(b *testing.B, sc script, reuse bool) {
	s := startServer(b, sc)
	u, err := url.Parse(s.url("pool=1"))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	openOne := func() *smtp.Transport {
		tr, err := smtp.URLOpener{}.OpenTransportURL(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		return tr.(*smtp.Transport)
	}
	shared := openOne()
	defer shared.Close()
	m := message()
	for b.Loop() {
		tr := shared
		if !reuse {
			tr = openOne()
		}
		if _, err := tr.Send(ctx, m); err != nil {
			b.Fatal(err)
		}
		if !reuse {
			_ = tr.Close()
		}
	}
	b.StopTimer()
	conns, _, _ := s.connStats()
	b.ReportMetric(float64(conns), "conns")
}
