package snapshots

import (
	"fmt"
	"hash/crc32"
	"os"
	"sync"
)

// parallelRead is the size from which a snapshot file is read, and its
// checksum computed, in two halves at once.
const parallelRead = 8 << 20

// readChecked reads the file at path and returns its bytes and the CRC-32C
// of all of them but the trailing checksum (0 when the file is shorter
// than a checksum). A large file is read and summed in two halves in
// parallel, the two sums combined.
func readChecked(path string) ([]byte, uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("snapshots: read: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("snapshots: read: %w", err)
	}
	size := fi.Size()
	if size < parallelRead || int64(int(size)) != size {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, 0, fmt.Errorf("snapshots: read: %w", err)
		}
		if len(b) < checksumSize {
			return b, 0, nil
		}
		return b, crc32.Checksum(b[:len(b)-checksumSize], castagnoli), nil
	}
	b := make([]byte, size)
	body := int(size) - checksumSize
	mid := body / 2
	var sums [2]uint32
	var errs [2]error
	var wg sync.WaitGroup
	for i, part := range [2][2]int{{0, mid}, {mid, int(size)}} {
		wg.Go(func() {
			if _, errs[i] = f.ReadAt(b[part[0]:part[1]], int64(part[0])); errs[i] != nil {
				return
			}
			sums[i] = crc32.Checksum(b[part[0]:min(part[1], body)], castagnoli)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, 0, fmt.Errorf("snapshots: read: %w", err)
		}
	}
	return b, crc32Combine(sums[0], sums[1], int64(body-mid)), nil
}

// crc32Combine returns the CRC-32C of a+b from crc(a), crc(b) and len(b)
// (zlib's crc32_combine: len(b) zero bits applied to crc(a) by repeated
// squaring of the operator matrix over GF(2)).
func crc32Combine(crc1, crc2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crc1
	}
	var even, odd [32]uint32
	odd[0] = crc32.Castagnoli // the operator for one zero bit
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four
	for {
		gf2Square(&even, &odd) // one zero byte, then 4, 16, ...
		if len2&1 != 0 {
			crc1 = gf2Times(&even, crc1)
		}
		if len2 >>= 1; len2 == 0 {
			break
		}
		gf2Square(&odd, &even)
		if len2&1 != 0 {
			crc1 = gf2Times(&odd, crc1)
		}
		if len2 >>= 1; len2 == 0 {
			break
		}
	}
	return crc1 ^ crc2
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := range mat {
		square[n] = gf2Times(mat, mat[n])
	}
}
