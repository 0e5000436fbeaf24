package outbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// outboxMetrics are the dispatcher's Prometheus metrics.
type outboxMetrics struct {
	delivered prometheus.Counter
	failed    *prometheus.CounterVec
	dead      prometheus.Counter
	reaped    prometheus.Counter
	backlog   prometheus.Collector
	running   prometheus.Gauge
}

func newOutboxMetrics(pool *pgxpool.Pool) *outboxMetrics {
	return &outboxMetrics{
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordersvc_outbox_delivered_total",
			Help: "Outbox events accepted by the receiver (2xx), or logged when no webhook is set. At least once: a redelivery counts again.",
		}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordersvc_outbox_failed_total",
			Help: "Failed outbox deliveries: kind=transient (timeout, connection error, 408, 429, 5xx; retried) or permanent (other 3xx/4xx; dead).",
		}, []string{"kind"}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordersvc_outbox_dead_total",
			Help: "Outbox events that went dead: refused permanently or out of attempts. See `api outbox dead`.",
		}),
		reaped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordersvc_outbox_reaped_total",
			Help: "Outbox events whose claim expired and that the reaper gave back.",
		}),
		backlog: &backlog{pool: pool, q: dbsqlc.New(),
			age: prometheus.NewDesc("ordersvc_outbox_oldest_pending_age_seconds",
				"Age of the oldest pending outbox event (0 when none), read from the database at scrape time.", nil, nil),
			pending: prometheus.NewDesc("ordersvc_outbox_pending_events",
				"Outbox events waiting for delivery, read from the database at scrape time.", nil, nil)},
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ordersvc_outbox_dispatcher_running",
			Help: "1 while this process runs the outbox dispatcher; 0 when OUTBOX_WEBHOOK_URL is unset (events wait for a process that has one).",
		}),
	}
}

func (m *outboxMetrics) register(reg prometheus.Registerer) {
	m.failed.WithLabelValues("transient") // present from the start, at zero
	m.failed.WithLabelValues("permanent")
	reg.MustRegister(m.delivered, m.failed, m.dead, m.reaped, m.backlog, m.running)
}

// backlog computes its gauges at scrape time, so that their cost follows
// the scrape interval rather than the number of replicas and their polls.
// They describe the database, not this process: a replica that runs no
// dispatcher (OUTBOX_WEBHOOK_URL unset) shows the backlog too. When the
// database does not answer in time, the series are left out of the scrape
// rather than reported as made-up values.
type backlog struct {
	pool         *pgxpool.Pool
	q            *dbsqlc.Queries
	age, pending *prometheus.Desc
}

func (b *backlog) Describe(ch chan<- *prometheus.Desc) { ch <- b.age; ch <- b.pending }

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := b.q.OutboxPendingBacklog(ctx, b.pool)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(b.age, prometheus.GaugeValue, r.Age)
	ch <- prometheus.MustNewConstMetric(b.pending, prometheus.GaugeValue, float64(r.Pending))
}
