// Go client for tools/record_samples (scenario "tls_go_client"): github.com/rabbitmq/amqp091-go over
// Go's crypto/tls, with tls.Config.KeyLogWriter appending to the capture's key log.
// Built outside the repository by tls.py (into /tmp/recgo) and run as: tlsclient tls13|tls12, with
// AMQPCAP_HOST/PORT/USER/PASSWORD/VHOST/SNI/CA/KEYLOG in the environment. Prints one JSON line with
// what the client did and saw; tls.py turns that into the expected facts.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	mode := os.Args[1]
	env := os.Getenv
	keylog, err := os.OpenFile(env("AMQPCAP_KEYLOG"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	must(err)
	defer keylog.Close()
	caPEM, err := os.ReadFile(env("AMQPCAP_CA"))
	must(err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	alpn := []string{"amqp"}
	cfg := &tls.Config{ServerName: env("AMQPCAP_SNI"), RootCAs: roots, KeyLogWriter: keylog, NextProtos: alpn}
	if mode == "tls12" {
		cfg.MaxVersion = tls.VersionTLS12
		cfg.CipherSuites = []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
	} else {
		cfg.MinVersion = tls.VersionTLS13
	}
	port, _ := strconv.Atoi(env("AMQPCAP_PORT"))
	u := url.URL{Scheme: "amqps", User: url.UserPassword(env("AMQPCAP_USER"), env("AMQPCAP_PASSWORD")),
		Host: net.JoinHostPort(env("AMQPCAP_HOST"), strconv.Itoa(port)), Path: "/" + env("AMQPCAP_VHOST")}
	conn, err := amqp.DialConfig(u.String(), amqp.Config{TLSClientConfig: cfg, Heartbeat: 60 * time.Second,
		Locale: "en_US"})
	must(err)
	state := conn.ConnectionState()
	clientPort := conn.LocalAddr().(*net.TCPAddr).Port
	ver := map[uint16]string{tls.VersionTLS12: "TLSv1.2", tls.VersionTLS13: "TLSv1.3"}[state.Version]

	ch, err := conn.Channel()
	must(err)
	q := "go." + mode
	_, err = ch.QueueDeclare(q, false, false, false, false, nil)
	must(err)
	must(ch.Confirm(false))
	ctx := context.Background()
	var confirms []bool
	var sizes []int
	publish := func(i int) {
		body := []byte(fmt.Sprintf("go %s message %d", mode, i))
		sizes = append(sizes, len(body))
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false,
			amqp.Publishing{ContentType: "text/plain", Body: body, MessageId: fmt.Sprintf("go-%d", i)})
		must(err)
		ok, err := dc.WaitContext(ctx)
		must(err)
		confirms = append(confirms, ok)
	}
	for i := 0; i < 3; i++ {
		publish(i)
	}
	deliveries, err := ch.Consume(q, "go-consumer", false, false, false, false, nil)
	must(err)
	n := 0
	for d := range deliveries {
		must(d.Ack(false))
		n++
		if n == 3 {
			break
		}
	}
	must(ch.Cancel("go-consumer", false))
	publish(3)
	getOk, getEmpty := 0, 0
	m, ok, err := ch.Get(q, false)
	must(err)
	if ok {
		getOk++
		must(m.Ack(false))
	}
	_, ok, err = ch.Get(q, false)
	must(err)
	if !ok {
		getEmpty++
	}
	_, err = ch.QueueDelete(q, false, false, false)
	must(err)
	must(ch.Close())
	must(conn.Close())

	peer := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: state.PeerCertificates[0].Raw})
	out, _ := json.Marshal(map[string]any{
		"client_port": clientPort, "version": ver, "cipher_suite": tls.CipherSuiteName(state.CipherSuite),
		"alpn_offered": alpn, "alpn": state.NegotiatedProtocol, "did_resume": state.DidResume,
		"server_name": state.ServerName, "peer_cert_pem": string(peer), "confirms": confirms,
		"deliveries": n, "get_ok": getOk, "get_empty": getEmpty, "body_sizes": sizes,
	})
	fmt.Println(string(out))
}
