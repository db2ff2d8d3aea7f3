rchar: 16795148
wchar: 16777404
syscr: 44
syscw: 22
read_bytes: 8388608
write_bytes: 8413184
cancelled_write_bytes: 0
