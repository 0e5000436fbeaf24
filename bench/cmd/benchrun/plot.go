package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// series is one line of the throughput chart.
type series struct {
	name       string
	kind, scen string
	col        color.RGBA
	dashed     bool
}

var chartSeries = []series{
	{"service spread", "service", "spread", color.RGBA{0x1f, 0x77, 0xb4, 255}, false},
	{"pgbench placement", "pgbench", "placement", color.RGBA{0x1f, 0x77, 0xb4, 255}, true},
	{"pgbench pipelined", "pgbench", "pipelined", color.RGBA{0x17, 0xbe, 0xcf, 255}, true},
	{"service hot", "service", "hot", color.RGBA{0xd6, 0x27, 0x28, 255}, false},
	{"pgbench hot", "pgbench", "hot", color.RGBA{0xd6, 0x27, 0x28, 255}, true},
	{"service no-keys", "service", "nokeys", color.RGBA{0x2c, 0xa0, 0x2c, 255}, false},
	{"pgbench no-keys", "pgbench", "nokeys", color.RGBA{0x2c, 0xa0, 0x2c, 255}, true},
	{"service storm (keys)", "service", "storm", color.RGBA{0x94, 0x67, 0xbd, 255}, false},
}

// chart is the throughput chart's canvas and scales.
type chart struct {
	img  *image.RGBA
	cs   []int
	maxY float64
	step float64
}

const (
	chartW, chartH                                   = 900, 560
	chartLeft, chartRight, chartTop, chartBottom int = 80, 240, 50, 60
)

var (
	grey  = color.RGBA{0xdd, 0xdd, 0xdd, 255}
	black = color.RGBA{0, 0, 0, 255}
)

// plot draws throughput against concurrency, service against pgbench, as a
// small PNG with no plotting library: axes, grid, one polyline per series.
func plot(r *Results, path string) error {
	cs := r.concurrencies()
	if len(cs) == 0 {
		return nil
	}
	ch := &chart{img: image.NewRGBA(image.Rect(0, 0, chartW, chartH)), cs: cs}
	draw.Draw(ch.img, ch.img.Bounds(), image.White, image.Point{}, draw.Src)
	ch.scale(r)
	ch.axes(r.Label)
	ly := chartTop + 10
	for _, s := range chartSeries {
		if ch.draw(r, s, ly) {
			ly += 20
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return png.Encode(f, ch.img)
}

// scale fits the y axis to the highest throughput of any series.
func (ch *chart) scale(r *Results) {
	for _, s := range chartSeries {
		for _, c := range ch.cs {
			if x := r.find(s.kind, s.scen, c); x != nil {
				ch.maxY = math.Max(ch.maxY, x.Throughput)
			}
		}
	}
	if ch.maxY == 0 {
		ch.maxY = 1
	}
	ch.step = niceStep(ch.maxY / 5)
	ch.maxY = math.Ceil(ch.maxY/ch.step) * ch.step
}

func (ch *chart) px(i int) int {
	if len(ch.cs) == 1 {
		return chartLeft + (chartW-chartLeft-chartRight)/2
	}
	return chartLeft + i*(chartW-chartLeft-chartRight)/(len(ch.cs)-1)
}

func (ch *chart) py(v float64) int {
	return chartH - chartBottom - int(v/ch.maxY*float64(chartH-chartTop-chartBottom))
}

// axes draws the grid, the axes and their labels.
func (ch *chart) axes(label string) {
	img := ch.img
	for v := 0.0; v <= ch.maxY+1e-9; v += ch.step {
		line(img, chartLeft, ch.py(v), chartW-chartRight, ch.py(v), grey, false)
		text(img, chartLeft-8-7*len(fmt.Sprintf("%.0f", v)), ch.py(v)+4, fmt.Sprintf("%.0f", v), black)
	}
	for i, c := range ch.cs {
		line(img, ch.px(i), chartTop, ch.px(i), chartH-chartBottom, grey, false)
		text(img, ch.px(i)-3*len(fmt.Sprint(c)), chartH-chartBottom+18, fmt.Sprint(c), black)
	}
	line(img, chartLeft, chartH-chartBottom, chartW-chartRight, chartH-chartBottom, black, false)
	line(img, chartLeft, chartTop, chartLeft, chartH-chartBottom, black, false)
	text(img, chartLeft, 25, "Throughput (orders/s) vs concurrency, "+label, black)
	text(img, (chartW-chartRight)/2-40, chartH-20, "concurrency (clients)", black)
}

// draw draws one series and its legend entry at ly; false when r has no
// run of it.
func (ch *chart) draw(r *Results, s series, ly int) bool {
	var pts [][2]int
	for i, c := range ch.cs {
		if x := r.find(s.kind, s.scen, c); x != nil {
			pts = append(pts, [2]int{ch.px(i), ch.py(x.Throughput)})
		}
	}
	if len(pts) == 0 {
		return false
	}
	for i := 1; i < len(pts); i++ {
		thick(ch.img, pts[i-1][0], pts[i-1][1], pts[i][0], pts[i][1], s.col, s.dashed)
	}
	for _, pt := range pts {
		for dx := -3; dx <= 3; dx++ {
			for dy := -3; dy <= 3; dy++ {
				ch.img.Set(pt[0]+dx, pt[1]+dy, s.col)
			}
		}
	}
	thick(ch.img, chartW-chartRight+15, ly, chartW-chartRight+45, ly, s.col, s.dashed)
	text(ch.img, chartW-chartRight+52, ly+4, s.name, black)
	return true
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, dashed bool) {
	for d := -1; d <= 1; d++ {
		line(img, x0, y0+d, x1, y1+d, c, dashed)
	}
}

// line draws with Bresenham; dashed lines skip every other 8 pixels.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, dashed bool) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	err := dx + dy
	for n := 0; ; n++ {
		if !dashed || (n/8)%2 == 0 {
			img.Set(x0, y0, c)
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * err
		if e2 >= dy {
			err += dy
			x0 += sx
		}
		if e2 <= dx {
			err += dx
			y0 += sy
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
