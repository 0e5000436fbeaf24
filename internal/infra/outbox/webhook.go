package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
)

// sink is where the dispatcher sends events.
type sink interface {
	send(ctx context.Context, ev Delivery) result
	close()
}

// result is the outcome of one delivery attempt.
type result struct {
	ok         bool
	permanent  bool          // retrying cannot help: the event goes dead
	retryAfter time.Duration // the receiver's Retry-After, when it sent one
	err        string        // what went wrong, for last_error
}

// envelope is the JSON body of a delivered event (api-contract section 4).
type envelope struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	OccurredAt time.Time       `json:"occurred_at"`
	Data       json.RawMessage `json:"data"`
}

func encodeEvent(ev Delivery) ([]byte, error) {
	return json.Marshal(envelope{ID: ev.ID.String(), Type: ev.Type, OccurredAt: ev.OccurredAt.UTC(), Data: ev.Data})
}

// webhook POSTs each event to one URL, with the event id as Idempotency-Key
// so that the receiver can drop the duplicates that at-least-once delivery
// implies.
//
// Status policy (documented in docs/events.md):
//   - 2xx: delivered.
//   - 408, 429, 5xx, a timeout or a connection error: transient; retried with
//     backoff (at least Retry-After, when the receiver sends one) until
//     MaxAttempts, then dead.
//   - any other status (3xx, other 4xx): permanent; dead at once. The
//     receiver read the request and refused it, and the request never
//     changes, so repeating it only delays the alert. Redirects are not
//     followed: a redirected POST may turn into a GET and lose its body.
//
// With secrets, each request is signed as Standard Webhooks describes (see
// sign).
type webhook struct {
	url     string
	client  *http.Client
	secrets [][]byte
	now     func() time.Time
}

func newWebhook(target string, timeout time.Duration, concurrency int, secrets [][]byte) *webhook {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// One kept-alive connection per delivery in flight, so that a steady
	// flow does not open a new connection per event.
	tr.MaxIdleConnsPerHost = max(concurrency, 2)
	return &webhook{url: target, secrets: secrets, now: time.Now, client: &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

func (w *webhook) close() { w.client.CloseIdleConnections() }

func (w *webhook) send(ctx context.Context, ev Delivery) result {
	body, err := encodeEvent(ev)
	if err != nil {
		return result{permanent: true, err: "encode: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return result{permanent: true, err: "build request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", ev.ID.String())
	req.Header.Set("User-Agent", "ordersvc-outbox/1")
	// The delivery's span, when tracing is on (W3C traceparent); nothing
	// otherwise.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if len(w.secrets) > 0 {
		ts := strconv.FormatInt(w.now().Unix(), 10)
		req.Header.Set("webhook-id", ev.ID.String())
		req.Header.Set("webhook-timestamp", ts)
		req.Header.Set("webhook-signature", sign(w.secrets, ev.ID.String(), ts, body))
	}
	res, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			if ue.Timeout() {
				return result{err: fmt.Sprintf("no answer within %s", w.client.Timeout)}
			}
			err = ue.Err
		}
		return result{err: "post: " + err.Error()}
	}
	defer res.Body.Close()
	// Read a little of the body, for last_error and so that the connection
	// can be reused; never the whole of an unbounded body.
	head, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	code := res.StatusCode
	switch {
	case code >= 200 && code < 300:
		return result{ok: true}
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return result{retryAfter: retryAfter(res.Header.Get("Retry-After")), err: describe(res, head)}
	default:
		return result{permanent: true, err: describe(res, head)}
	}
}

// describe renders a refused delivery for last_error: the status and the
// start of the body, on one printable line of valid UTF-8.
func describe(res *http.Response, head []byte) string {
	return strings.TrimSpace("receiver answered " + oneLine(res.Status+" "+string(head), maxErrorText))
}

// maxErrorText is how many bytes of a receiver's answer last_error keeps.
const maxErrorText = 200

// oneLine makes s fit for a text column: valid UTF-8 (PostgreSQL refuses
// anything else, and the outcome of the delivery would be lost with it),
// control characters as spaces, and at most limit bytes, cut on a character
// boundary and marked with an ellipsis.
func oneLine(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, " "))
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// retryAfter reads a Retry-After header in seconds or as an HTTP date.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// logSink stands in for the webhook when OUTBOX_WEBHOOK_URL=log: each
// event is logged and counts as delivered.
type logSink struct{ log *slog.Logger }

func (s logSink) send(ctx context.Context, ev Delivery) result {
	s.log.InfoContext(ctx, "outbox event (OUTBOX_WEBHOOK_URL=log: marked delivered, not sent)", "event_id", ev.ID, "type", ev.Type,
		"aggregate_id", ev.AggregateID, "data", string(ev.Data))
	return result{ok: true}
}

func (logSink) close() {}

// redactURL is a webhook URL fit for the logs: no credentials, no query.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	return u.Scheme + "://" + u.Host + u.Path
}
