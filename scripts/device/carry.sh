# Sourced by the prepare scripts: move a filled carry folder into place if the device tool can send it.
# The working tree travels beside the carry (64 MiB in all), so the carry itself stays under MAX_MIB.
# usage: place_carry TMP DEST MAX_MIB
place_carry() {
  local tmp=$1 dest=$2 max=$3 size
  size=$(du -sm "$tmp" | cut -f1)
  [ "$size" -le "$max" ] || { echo "error: carry is ${size} MiB, over the ${max} MiB it may take" >&2; return 1; }
  rm -rf "$dest"
  mv "$tmp" "$dest"
  echo "prepared $dest (${size} MiB)"
}
