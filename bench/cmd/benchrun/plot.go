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

// plot draws throughput against concurrency, service against pgbench, as a
// small PNG with no plotting library: axes, grid, one polyline per series.
func plot(r *Results, path string) error {
	const W, H = 900, 560
	const left, right, top, bottom = 80, 240, 50, 60
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	type series struct {
		name       string
		kind, scen string
		col        color.RGBA
		dashed     bool
	}
	all := []series{
		{"service spread", "service", "spread", color.RGBA{0x1f, 0x77, 0xb4, 255}, false},
		{"pgbench placement", "pgbench", "placement", color.RGBA{0x1f, 0x77, 0xb4, 255}, true},
		{"service hot", "service", "hot", color.RGBA{0xd6, 0x27, 0x28, 255}, false},
		{"pgbench hot", "pgbench", "hot", color.RGBA{0xd6, 0x27, 0x28, 255}, true},
		{"service no-keys", "service", "nokeys", color.RGBA{0x2c, 0xa0, 0x2c, 255}, false},
		{"pgbench no-keys", "pgbench", "nokeys", color.RGBA{0x2c, 0xa0, 0x2c, 255}, true},
		{"service storm (keys)", "service", "storm", color.RGBA{0x94, 0x67, 0xbd, 255}, false},
	}
	cs := r.concurrencies()
	if len(cs) == 0 {
		return nil
	}
	maxY := 0.0
	for _, s := range all {
		for _, c := range cs {
			if x := r.find(s.kind, s.scen, c); x != nil {
				maxY = math.Max(maxY, x.Throughput)
			}
		}
	}
	if maxY == 0 {
		maxY = 1
	}
	step := niceStep(maxY / 5)
	maxY = math.Ceil(maxY/step) * step
	px := func(i int) int {
		if len(cs) == 1 {
			return left + (W-left-right)/2
		}
		return left + i*(W-left-right)/(len(cs)-1)
	}
	py := func(v float64) int { return H - bottom - int(v/maxY*float64(H-top-bottom)) }
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 255}
	black := color.RGBA{0, 0, 0, 255}
	for v := 0.0; v <= maxY+1e-9; v += step {
		line(img, left, py(v), W-right, py(v), grey, false)
		text(img, left-8-7*len(fmt.Sprintf("%.0f", v)), py(v)+4, fmt.Sprintf("%.0f", v), black)
	}
	for i, c := range cs {
		line(img, px(i), top, px(i), H-bottom, grey, false)
		text(img, px(i)-3*len(fmt.Sprint(c)), H-bottom+18, fmt.Sprint(c), black)
	}
	line(img, left, H-bottom, W-right, H-bottom, black, false)
	line(img, left, top, left, H-bottom, black, false)
	text(img, left, 25, "Throughput (orders/s) vs concurrency, "+r.Label, black)
	text(img, (W-right)/2-40, H-20, "concurrency (clients)", black)
	ly := top + 10
	for _, s := range all {
		var pts [][2]int
		for i, c := range cs {
			if x := r.find(s.kind, s.scen, c); x != nil {
				pts = append(pts, [2]int{px(i), py(x.Throughput)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		for i := 1; i < len(pts); i++ {
			thick(img, pts[i-1][0], pts[i-1][1], pts[i][0], pts[i][1], s.col, s.dashed)
		}
		for _, pt := range pts {
			for dx := -3; dx <= 3; dx++ {
				for dy := -3; dy <= 3; dy++ {
					img.Set(pt[0]+dx, pt[1]+dy, s.col)
				}
			}
		}
		thick(img, W-right+15, ly, W-right+45, ly, s.col, s.dashed)
		text(img, W-right+52, ly+4, s.name, black)
		ly += 20
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return png.Encode(f, img)
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
