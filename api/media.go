package api

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image/jpeg"
)

var pngSignature = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}

// checkPNG checks the PNG signature and the IHDR chunk (length, type,
// dimensions, bit depth and color type, CRC).
func checkPNG(b []byte) error {
	if len(b) < 33 || !bytes.Equal(b[:8], pngSignature) {
		return errInvalidPNG
	}
	if binary.BigEndian.Uint32(b[8:12]) != 13 || string(b[12:16]) != "IHDR" {
		return errInvalidPNG
	}
	ihdr := b[16:29]
	w, h := binary.BigEndian.Uint32(ihdr[0:4]), binary.BigEndian.Uint32(ihdr[4:8])
	if w == 0 || h == 0 || w > 1<<31-1 || h > 1<<31-1 {
		return errInvalidPNG
	}
	depth, color := ihdr[8], ihdr[9]
	valid := map[byte][]byte{0: {1, 2, 4, 8, 16}, 2: {8, 16}, 3: {1, 2, 4, 8}, 4: {8, 16}, 6: {8, 16}}
	if !bytes.Contains(valid[color], []byte{depth}) || ihdr[10] != 0 || ihdr[11] != 0 || ihdr[12] > 1 {
		return errInvalidPNG
	}
	if crc32.ChecksumIEEE(b[12:29]) != binary.BigEndian.Uint32(b[29:33]) {
		return errInvalidPNG
	}
	return nil
}

// checkJPEG checks a real JPEG: start and end markers and a decodable
// frame header.
func checkJPEG(b []byte) error {
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 || b[len(b)-2] != 0xff || b[len(b)-1] != 0xd9 {
		return errInvalidJPEG
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width == 0 || cfg.Height == 0 {
		return errInvalidJPEG
	}
	return nil
}
