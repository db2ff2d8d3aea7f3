package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
)

// ErrBlobMismatch is matched when a blob of an image is not the one its
// descriptor names: another digest, or another size.
var ErrBlobMismatch = errors.New("blob does not match its descriptor")

// ociSource is an image as read, with the descriptor that named its
// manifest: none for a docker archive, whose manifest go-containerregistry
// makes from the blobs themselves.
type ociSource struct {
	img  v1.Image
	desc *v1.Descriptor
}

// verifier passes on what it reads, hashing and counting it, and fails
// the read that reaches the end of a blob whose size or digest is not
// the one wanted (a size below 0 is not checked). Nothing read through it
// may be trusted before that end.
type verifier struct {
	r    io.Reader
	what string
	want v1.Hash
	size int64
	h    hash.Hash
	n    int64
}

func newVerifier(r io.Reader, what string, want v1.Hash, size int64) (*verifier, error) {
	if want.Algorithm != "sha256" {
		return nil, fmt.Errorf("%s: digest %s: only sha256 digests are supported", what, want)
	}
	return &verifier{r: r, what: what, want: want, size: size, h: sha256.New()}, nil
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.size >= 0 && v.n > v.size {
		return n, fmt.Errorf("%s: %w: longer than its %d bytes", v.what, ErrBlobMismatch, v.size)
	}
	if errors.Is(err, io.EOF) {
		if got := fmt.Sprintf("sha256:%x", v.h.Sum(nil)); v.size >= 0 && v.n != v.size || got != v.want.String() {
			return n, fmt.Errorf("%s: %w: %d bytes of digest %s, want %d bytes of digest %s", v.what, ErrBlobMismatch, v.n, got, v.size, v.want)
		}
	}
	return n, err
}

// verifyBytes checks a blob read whole.
func verifyBytes(b []byte, what string, want v1.Hash, size int64) error {
	v, err := newVerifier(bytes.NewReader(b), what, want, size)
	if err == nil {
		_, err = io.Copy(io.Discard, v)
	}
	return err
}

// verifiedLayer is a layer whose compressed bytes are checked against
// its descriptor as they are read; the last reader it opened is kept, so
// that what its decompressor left unread can be drained and checked.
type verifiedLayer struct {
	v1.Layer
	desc v1.Descriptor
	what string
	last *verifier
}

func (l *verifiedLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	v, err := newVerifier(rc, l.what, l.desc.Digest, l.desc.Size)
	if err != nil {
		rc.Close()
		return nil, err
	}
	l.last = v
	return struct {
		io.Reader
		io.Closer
	}{v, rc}, nil
}

// walkOCI reads every blob of the image, each checked against its
// descriptor while it is read: the manifest against the descriptor that
// named it, the config against the manifest's, each layer's compressed
// bytes against the manifest's and its tar against the config's diff_id.
// apply gets each layer's tar in order; with a nil apply the tar is only
// read through, which finds a corrupt layer as unpacking would. An error
// names the blob.
func walkOCI(src ociSource, apply func(tar io.Reader) error) (*v1.ConfigFile, int, error) {
	raw, err := src.img.RawManifest()
	if err != nil {
		return nil, 0, fmt.Errorf("manifest: %w", err)
	}
	if d := src.desc; d != nil {
		if err := verifyBytes(raw, "manifest "+d.Digest.String(), d.Digest, d.Size); err != nil {
			return nil, 0, err
		}
	}
	m, err := src.img.Manifest()
	if err != nil {
		return nil, 0, fmt.Errorf("manifest: %w", err)
	}
	rawCfg, err := src.img.RawConfigFile()
	if err != nil {
		return nil, 0, fmt.Errorf("config %s: %w", m.Config.Digest, err)
	}
	if err := verifyBytes(rawCfg, "config "+m.Config.Digest.String(), m.Config.Digest, m.Config.Size); err != nil {
		return nil, 0, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawCfg))
	if err != nil {
		return nil, 0, fmt.Errorf("config %s: %w", m.Config.Digest, err)
	}
	layers, err := src.img.Layers()
	if err != nil {
		return nil, 0, err
	}
	if len(layers) != len(m.Layers) || len(layers) != len(cfg.RootFS.DiffIDs) {
		// Without one descriptor per layer, a layer could not be checked.
		return nil, 0, fmt.Errorf("%d layers in the manifest, %d diff_ids in config %s", len(m.Layers), len(cfg.RootFS.DiffIDs), m.Config.Digest)
	}
	if apply == nil {
		apply = readTar
	}
	for i, l := range layers {
		what := fmt.Sprintf("layer %d (%s)", i+1, m.Layers[i].Digest)
		if err := walkLayer(src, l, m.Layers[i], cfg.RootFS.DiffIDs[i], what, apply); err != nil {
			return nil, 0, err
		}
	}
	return cfg, len(layers), nil
}

// walkLayer hands one layer's tar to apply, and reads what apply left of
// it to its end, where the verifiers judge it.
func walkLayer(src ociSource, l v1.Layer, desc v1.Descriptor, diffID v1.Hash, what string, apply func(io.Reader) error) error {
	vl := &verifiedLayer{Layer: l, desc: desc, what: what}
	open := l.Uncompressed
	if src.desc != nil {
		// A docker archive's manifest is made from its layers, so only
		// the diff_ids check them; the others' name the compressed bytes.
		pl, err := partial.CompressedToLayer(vl)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		open = pl.Uncompressed
	}
	// A verifier's error names its blob already.
	wrap := func(err error) error {
		if errors.Is(err, ErrBlobMismatch) {
			return err
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	rc, err := open()
	if err != nil {
		return wrap(err)
	}
	defer rc.Close()
	tarV, err := newVerifier(rc, what+" diff_id "+diffID.String(), diffID, -1)
	if err != nil {
		return err
	}
	if err := apply(tarV); err != nil {
		return wrap(err)
	}
	if _, err := io.Copy(io.Discard, tarV); err != nil {
		return wrap(err)
	}
	if vl.last != nil {
		if _, err := io.Copy(io.Discard, vl.last); err != nil {
			return err
		}
	}
	return nil
}

// readTar reads a tar archive through to its end.
func readTar(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return err
		}
	}
}
