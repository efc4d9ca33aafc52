package smtp_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/mail"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/smtp"
)

// Example registers the SMTP adapter in a Mux, opens a transport from its
// URL and sends one mail. The URL here points at a local relay without
// TLS; a real one looks like
// smtp://user@smtp.example.com:587?password_env=SMTP_PASSWORD.
func Example() {
	addr, stop := exampleRelay()
	defer stop()

	var mux transport.Mux
	mux.Register("smtp", smtp.URLOpener{})
	mux.Register("smtps", smtp.URLOpener{})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := mux.OpenTransport(ctx, "smtp://"+addr+"?tls=none&timeout=5s")
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()

	receipt, err := tr.Send(ctx, &transport.Message{
		MessageID: "order-42@shop.example.com",
		From:      mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:        mail.Address{Name: "Jörg", Address: "joerg@example.net"},
		Subject:   "Your order has shipped",
		Text:      "It is on its way.\n",
	})
	if err != nil {
		log.Fatalf("send failed (%s): %v", transport.KindOf(err), err)
	}
	fmt.Println(receipt.MessageID)
	fmt.Println(receipt.Response)
	// Output:
	// order-42@shop.example.com
	// 2.0.0 OK: queued as Q1
}

// exampleRelay starts a test server on 127.0.0.1 that accepts every mail.
func exampleRelay() (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	s := &server{script: script{tls: noTLS}, done: make(chan struct{}), live: map[net.Conn]bool{}}
	s.srv = gosmtp.NewServer(s)
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() { _ = s.srv.Serve(&scriptedListener{Listener: ln, s: s}) }()
	return ln.Addr().String(), func() { close(s.done); _ = ln.Close(); _ = s.srv.Close() }
}
