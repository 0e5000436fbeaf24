package postgres

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolCollector reports the pgx pool's statistics at scrape time, so every
// series exists from the first scrape on.
type poolCollector struct {
	pool                                                                    *pgxpool.Pool
	conns, maxConns, acquires, emptyAcquires, canceled, acquireSec, waitSec *prometheus.Desc
}

// RegisterPoolMetrics registers the pool's statistics on reg:
//
//	ordersvc_db_pool_connections{state="acquired"|"idle"|"constructing"}
//	ordersvc_db_pool_max_connections
//	ordersvc_db_pool_acquires_total
//	ordersvc_db_pool_empty_acquires_total       acquires that found no idle connection and waited
//	ordersvc_db_pool_canceled_acquires_total    acquires given up (context ended) while waiting
//	ordersvc_db_pool_acquire_seconds_total      time spent acquiring, all acquires
//	ordersvc_db_pool_empty_acquire_wait_seconds_total  time spent waiting by the empty acquires
//
// A rising empty-acquire rate with a flat acquire rate means requests queue
// for connections: the pool (DB_MAX_CONNS) or the database is the limit.
func RegisterPoolMetrics(reg prometheus.Registerer, pool *Pool) {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("ordersvc_db_pool_"+name, help, labels, nil)
	}
	reg.MustRegister(&poolCollector{
		pool:          pool.Pool,
		conns:         d("connections", "Connections in the pool by state.", "state"),
		maxConns:      d("max_connections", "The pool's size (DB_MAX_CONNS)."),
		acquires:      d("acquires_total", "Connections acquired from the pool."),
		emptyAcquires: d("empty_acquires_total", "Acquires that found no idle connection and waited for one."),
		canceled:      d("canceled_acquires_total", "Acquires given up while waiting (their context ended)."),
		acquireSec:    d("acquire_seconds_total", "Time spent acquiring connections, all acquires."),
		waitSec:       d("empty_acquire_wait_seconds_total", "Time spent waiting by the acquires that found no idle connection."),
	})
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.maxConns, c.acquires, c.emptyAcquires, c.canceled, c.acquireSec, c.waitSec} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	g, k := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(c.conns, g, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, g, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, g, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(c.maxConns, g, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, k, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.emptyAcquires, k, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.canceled, k, float64(s.CanceledAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.acquireSec, k, s.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(c.waitSec, k, s.EmptyAcquireWaitTime().Seconds())
}
