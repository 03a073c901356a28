// Command e2e is the offline fixture's static program (egress-and-reap.md §5.4): "serve" is
// the HTTPS target server (any request → 200, certificate from the environment, each request
// logged as "request METHOD PATH", its body read, so a client that expects 100 Continue gets
// it; the query "e2e=hints" answers a 103 Early Hints first, "e2e=echo" echoes every header,
// credentials included, in several encodings: see serve), and the client verbs run inside a
// workload: "get" fetches a URL through the proxy the environment names and prints
// "code=NNN", "send" does the same with any method and the roots the environment names
// (SSL_CERT_FILE), "raw" and "rawall" write raw requests over TLS through the proxy, "dial"
// opens a raw TCP connection, "udp" sends one datagram and waits udpWait for any answer,
// "resolve" looks a name up.
// "dns" is the canary DNS server of §5.3: it prints every query it receives and answers
// each with NXDOMAIN, so a leak shows in its log and nothing is ever resolved through it.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: e2e serve | dns | get URL CA_B64 | send METHOD URL [HEADER…] | raw|rawall HOST SNI ALPN PAYLOAD_B64 | dial HOST:PORT | udp HOST:PORT | resolve NAME")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "dns":
		canary()
	case "get":
		get(os.Args[2], os.Args[3])
	case "send":
		send(os.Args[2], os.Args[3], os.Args[4:]...)
	case "raw", "rawall":
		raw(os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[1] == "rawall")
	case "dial":
		c, err := net.DialTimeout("tcp", os.Args[2], 3*time.Second)
		if err != nil {
			fmt.Println("dial failed:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
	case "udp":
		answer, err := udpExchange(os.Args[2], udpWait)
		if err != nil {
			fmt.Println("no answer:", err)
			os.Exit(1)
		}
		fmt.Println(answer)
	case "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, os.Args[2])
		if err != nil {
			fmt.Println("resolve failed:", err)
			os.Exit(1)
		}
		fmt.Println(addrs)
	default:
		os.Exit(2)
	}
}

// udpWait is how long "udp" waits for an answer. A port-unreachable comes back at once from
// an idle host, but the attack tests send every probe at once from a loaded machine, and a
// positive control that misses its answer fails the test: three seconds leaves room.
const udpWait = 3 * time.Second

// udpExchange sends one datagram to addr on a connected socket and waits up to wait for
// anything back. A datagram or an ICMP port-unreachable (ECONNREFUSED on a connected socket)
// is an answer: either proves the address is reached. Silence and no route are errors.
func udpExchange(addr string, wait time.Duration) (string, error) {
	c, err := net.DialTimeout("udp", addr, wait)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	_, err = c.Write([]byte("x"))
	if err == nil {
		_, err = c.Read(make([]byte, 1))
	}
	switch {
	case err == nil:
		return "answered a datagram", nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return "answered port-unreachable (refused)", nil
	}
	return "", err
}

func serve() {
	cert, err := tls.X509KeyPair([]byte(os.Getenv("E2E_CERT")), []byte(os.Getenv("E2E_KEY")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "certificate:", err)
		os.Exit(1)
	}
	srv := &http.Server{Addr: ":443", ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A request with credentials logs their digest, never their value, and the
			// answer echoes every other header: a test finds there anything the proxy added.
			if auth := r.Header.Get("Authorization"); auth != "" {
				sum := sha256.Sum256([]byte(auth))
				fmt.Printf("request %s %s auth-sha256=%s\n", r.Method, r.URL.EscapedPath(), hex.EncodeToString(sum[:]))
			} else {
				fmt.Printf("request %s %s\n", r.Method, r.URL.EscapedPath())
			}
			_, _ = io.Copy(io.Discard, r.Body) // Go's server sends 100 Continue to a client that expects it
			switch r.URL.Query().Get("e2e") {
			case "hints":
				w.Header().Set("Link", "</style.css>; rel=preload")
				w.WriteHeader(http.StatusEarlyHints)
			case "echo":
				echo(w, r)
				return
			}
			fmt.Fprintln(w, "ok")
			for name, vs := range r.Header {
				if name != "Authorization" {
					fmt.Fprintf(w, "%s: %s\n", name, strings.Join(vs, ", "))
				}
			}
		})}
	fmt.Println("serving on :443")
	if err := srv.ListenAndServeTLS("", ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// echo answers with every header of r, credentials included, as a header-reflecting endpoint
// does: as response fields (X-Echo-Name), and in the body as "Name: value" lines, each line
// again in base64 (standard and URL alphabets) and percent-encoded, and all as JSON. The body
// goes in two writes 50 ms apart, the first ending in the middle of the Authorization value,
// so that a proxy reads it across a boundary.
func echo(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	for name, vs := range r.Header {
		for _, v := range vs {
			w.Header().Add("X-Echo-"+name, v)
			line := name + ": " + v
			fmt.Fprintf(&b, "%s\n%s\n%s\n%s\n", line, base64.StdEncoding.EncodeToString([]byte(line)),
				base64.URLEncoding.EncodeToString([]byte(line)), url.QueryEscape(line))
		}
	}
	js, _ := json.Marshal(r.Header)
	b.Write(js)
	b.WriteString("\n")
	text := b.String()
	half := len(text) / 2
	if i := strings.Index(text, "Authorization: "); i >= 0 {
		half = i + len("Authorization: ") + len(r.Header.Get("Authorization"))/2
	}
	_, _ = io.WriteString(w, text[:half])
	w.(http.Flusher).Flush()
	time.Sleep(50 * time.Millisecond)
	_, _ = io.WriteString(w, text[half:])
}

func get(url, caB64 string) {
	pem, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		fmt.Println("code=000 bad CA")
		os.Exit(2)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Printf("code=000 err=%v\n", err)
		os.Exit(1)
	}
	resp.Body.Close()
	fmt.Printf("code=%d\n", resp.StatusCode)
}

// send makes one request of method to url through the proxy the environment names, trusting
// the system roots: on Linux Go reads them from SSL_CERT_FILE when it is set. A response
// prints "code=NNN", no response "code=000 err=…". With headers ("Name: value"), it sends
// them and prints the response's body after the code.
//
// With E2E_BODY set, it sends that as the body, and a request with "Expect: 100-continue"
// sends it only once the 100 Continue has come (or 10 s have passed).
func send(method, url string, headers ...string) {
	var payload io.Reader
	if b, ok := os.LookupEnv("E2E_BODY"); ok {
		payload = strings.NewReader(b)
	}
	req, err := http.NewRequest(method, url, payload)
	if err != nil {
		fmt.Println("code=000 bad request:", err)
		os.Exit(2)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ExpectContinueTimeout: 10 * time.Second}}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Printf("code=000 err=%v\n", err)
		os.Exit(1)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	fmt.Printf("code=%d\n", resp.StatusCode)
	if len(headers) > 0 {
		fmt.Print(string(body))
	}
}

// canary serves DNS on UDP :53. Each query is logged as "query NAME TYPE from ADDR" and
// answered NXDOMAIN with the question echoed, so a forwarder gets a final answer at once.
func canary() {
	pc, err := net.ListenPacket("udp", ":53")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	fmt.Println("canary listening on :53")
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "read:", err)
			os.Exit(1)
		}
		name, qtype, qend, ok := question(buf[:n])
		if !ok {
			fmt.Printf("malformed query of %d bytes from %s\n", n, from)
			continue
		}
		fmt.Printf("query %s %d from %s\n", name, qtype, from)
		resp := append([]byte(nil), buf[:qend]...)
		resp[2] = 0x80 | buf[2]&0x79 // QR, keep opcode and RD
		resp[3] = 0x80 | 3           // RA, RCODE NXDOMAIN
		binary.BigEndian.PutUint16(resp[4:], 1)
		clear(resp[6:12]) // no answer, authority or additional records
		_, _ = pc.WriteTo(resp, from)
	}
}

// question parses the header and the first question of a DNS message: the name in dotted
// form, its type, and the offset just past the question.
func question(m []byte) (name string, qtype uint16, end int, ok bool) {
	if len(m) < 12 || binary.BigEndian.Uint16(m[4:]) == 0 {
		return "", 0, 0, false
	}
	var labels []string
	i := 12
	for {
		if i >= len(m) {
			return "", 0, 0, false
		}
		l := int(m[i])
		if l == 0 {
			i++
			break
		}
		if l > 63 || i+1+l > len(m) {
			return "", 0, 0, false
		}
		labels = append(labels, string(m[i+1:i+1+l]))
		i += 1 + l
	}
	if i+4 > len(m) {
		return "", 0, 0, false
	}
	return strings.Join(labels, ".") + ".", binary.BigEndian.Uint16(m[i:]), i + 4, true
}
