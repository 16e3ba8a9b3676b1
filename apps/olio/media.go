package olio

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"strings"
	"sync"
)

// Images and documents of the file store. Olio's loader copied one sample
// photo, thumbnail and PDF for every person and event; this one draws a
// pool of distinct pictures and documents (deterministic, so part of
// GeneratorVersion) and gives every entity a file of its own that is a hard
// link to one of them.
const (
	// PoolSize distinct files of each kind are drawn.
	PoolSize = 16
	// ImageWidth x ImageHeight is the size of a photo or event image.
	ImageWidth, ImageHeight = 400, 300
	// ThumbWidth x ThumbHeight is the size of a thumbnail (the site's GD
	// thumbnails fit the same box).
	ThumbWidth, ThumbHeight = 133, 100
	jpegQuality             = 80
)

// SampleImage returns the k-th pool picture (any k >= 0) as a JPEG of the
// full size: the loader's photos and event images, and what the driver
// uploads with AddPerson and AddEvent.
func SampleImage(k int) []byte { return mediaPool().images[k%PoolSize] }

// SampleThumb returns the thumbnail of SampleImage(k).
func SampleThumb(k int) []byte { return mediaPool().thumbs[k%PoolSize] }

// SampleDocument returns the k-th pool PDF: the loader's event documents and
// what the driver uploads with AddEvent.
func SampleDocument(k int) []byte { return mediaPool().docs[k%PoolSize] }

type pool struct{ images, thumbs, docs [][]byte }

var mediaPool = sync.OnceValue(func() *pool {
	p := &pool{}
	for k := range PoolSize {
		p.images = append(p.images, encodeJPEG(picture(k, ImageWidth, ImageHeight)))
		p.thumbs = append(p.thumbs, encodeJPEG(picture(k, ThumbWidth, ThumbHeight)))
		p.docs = append(p.docs, document(k))
	}
	return p
})

// picture draws pool picture k at w x h: a two-colour gradient with a few
// discs and grain, so that its JPEG is about as large as a small photo's.
// The same k at another size is the same picture scaled (its thumbnail).
func picture(k, w, h int) *image.RGBA {
	r := rand.New(rand.NewPCG(uint64(k), 0x0110))
	c0 := [3]float64{float64(r.IntN(256)), float64(r.IntN(256)), float64(r.IntN(256))}
	c1 := [3]float64{float64(r.IntN(256)), float64(r.IntN(256)), float64(r.IntN(256))}
	type disc struct{ x, y, rad float64 }
	discs := make([]disc, 3+r.IntN(5))
	for i := range discs {
		discs[i] = disc{r.Float64(), r.Float64(), 0.05 + 0.2*r.Float64()}
	}
	grain := rand.New(rand.NewPCG(uint64(k), uint64(w*10000+h)))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			fx, fy := float64(x)/float64(w), float64(y)/float64(h)
			t := (fx + fy) / 2
			var c [3]float64
			for i := range c {
				c[i] = c0[i]*(1-t) + c1[i]*t
			}
			for _, d := range discs {
				dx, dy := fx-d.x, (fy-d.y)*float64(h)/float64(w)
				if dx*dx+dy*dy < d.rad*d.rad {
					for i := range c {
						c[i] = 255 - c[i]
					}
				}
			}
			n := float64(grain.IntN(41) - 20)
			img.SetRGBA(x, y, color.RGBA{clamp(c[0] + n), clamp(c[1] + n), clamp(c[2] + n), 255})
		}
	}
	return img
}

func clamp(v float64) uint8 {
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return uint8(v)
}

func encodeJPEG(img image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: jpegQuality}); err != nil {
		panic(fmt.Sprintf("olio: encoding a JPEG in memory: %v", err)) // cannot fail on a bytes.Buffer
	}
	return b.Bytes()
}

// document writes pool PDF k: three pages of text, a valid PDF 1.4 file.
func document(k int) []byte {
	r := rand.New(rand.NewPCG(uint64(k), 0x0bdf))
	var objs []string
	const pages = 3
	kids := make([]string, pages)
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), pages),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for p := range pages {
		var s strings.Builder
		fmt.Fprintf(&s, "BT /F1 11 Tf 14 TL 72 740 Td (Event document %d, page %d) Tj T*\n", k, p+1)
		for range 48 {
			fmt.Fprintf(&s, "(%s) '\n", text(r, 60, 90))
		}
		s.WriteString("ET")
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 3 0 R >> >> >>", 5+2*p),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", s.Len(), s.String()))
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// staticImages are the site's small PNG images (logo, header, tabs, stars,
// icons), drawn here rather than kept as binary files in the repository.
var staticImages = sync.OnceValue(func() map[string][]byte {
	specs := map[string]struct {
		w, h int
		c    color.RGBA
	}{
		"logo.png": {160, 48, color.RGBA{0xf0, 0xa0, 0x30, 255}}, "header_bg.png": {960, 64, color.RGBA{0x2b, 0x5f, 0x8a, 255}},
		"footer_bg.png": {960, 24, color.RGBA{0xdd, 0xe6, 0xee, 255}}, "rss.png": {28, 28, color.RGBA{0xf6, 0x8a, 0x1e, 255}},
		"tab_left.png": {12, 24, color.RGBA{0x9c, 0xb4, 0xc8, 255}}, "tab_right.png": {12, 24, color.RGBA{0x9c, 0xb4, 0xc8, 255}},
		"search.png": {20, 20, color.RGBA{0x55, 0x55, 0x55, 255}}, "star_on.png": {16, 16, color.RGBA{0xf5, 0xc0, 0x10, 255}},
		"star_half.png": {16, 16, color.RGBA{0xf5, 0xd8, 0x80, 255}}, "star_off.png": {16, 16, color.RGBA{0xcc, 0xcc, 0xcc, 255}},
		"map.png": {120, 90, color.RGBA{0x7a, 0xb0, 0x6a, 255}}, "attend.png": {24, 24, color.RGBA{0x30, 0x90, 0x40, 255}},
		"comment.png": {24, 24, color.RGBA{0x60, 0x60, 0xb0, 255}},
	}
	out := map[string][]byte{}
	for name, s := range specs {
		h := fnv.New64a()
		h.Write([]byte(name))
		r := rand.New(rand.NewPCG(h.Sum64(), 1))
		img := image.NewRGBA(image.Rect(0, 0, s.w, s.h))
		for y := range s.h {
			for x := range s.w {
				shade := float64(y) / float64(s.h) * 40
				n := float64(r.IntN(9) - 4)
				img.SetRGBA(x, y, color.RGBA{clamp(float64(s.c.R) - shade + n), clamp(float64(s.c.G) - shade + n), clamp(float64(s.c.B) - shade + n), 255})
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			panic(fmt.Sprintf("olio: encoding a PNG in memory: %v", err))
		}
		out[name] = b.Bytes()
	}
	return out
})
