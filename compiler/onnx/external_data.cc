#include "compiler/onnx/external_data.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fbl::onnx {

namespace fs = std::filesystem;

namespace {

// Closes the descriptor on every return path.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status readFully(int fd, std::byte* dst, size_t n, int64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return makeError("{}: cannot read ({})", path, r < 0 ? std::strerror(errno) : "file shrank");
    done += static_cast<size_t>(r);
  }
  return {};
}

bool isWithin(const fs::path& dir, const fs::path& p) {
  auto d = dir.begin(), e = dir.end();
  auto q = p.begin();
  for (; d != e; ++d, ++q) {
    if (d->empty()) continue;  // trailing separator of the folder
    if (q == p.end() || *q != *d) return false;
  }
  return true;
}

}  // namespace

Result<std::string> readWholeFile(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ENOENT) return makeError("{}: no such file", path);
    return makeError("{}: cannot open ({})", path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return makeError("{}: cannot stat ({})", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return makeError("{}: is a folder, not a file", path);
  if (!S_ISREG(st.st_mode)) return makeError("{}: not a regular file", path);
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  FBL_TRY(readFully(f.fd, reinterpret_cast<std::byte*>(bytes.data()), bytes.size(), 0, path));
  return bytes;
}

Result<std::string> resolveExternalPath(const std::string& modelPath, std::string_view location,
                                        std::string_view tensor) {
  auto refuse = [&](std::string_view why) -> Error {
    return makeError("{}: tensor '{}': external data path '{}' {}; it must be a file inside "
                     "the model's folder",
                     modelPath, tensor, location, why);
  };
  if (location.empty()) return refuse("is empty");
  if (location.find('\0') != std::string_view::npos) return refuse("contains a NUL byte");
  fs::path loc{std::string(location)};
  if (loc.is_absolute() || loc.has_root_name() || loc.has_root_directory())
    return refuse("is absolute");
  fs::path norm = loc.lexically_normal();
  if (!norm.empty() && *norm.begin() == "..") return refuse("leaves the model's folder");

  fs::path dir = fs::path(modelPath).parent_path();
  if (dir.empty()) dir = ".";
  fs::path full = dir / norm;
  // Symlinks: compare the resolved file against the resolved folder. weakly_canonical resolves
  // the part that exists, so a missing file is still checked through its existing parents.
  std::error_code ec1, ec2;
  fs::path realDir = fs::weakly_canonical(dir, ec1);
  fs::path realFull = fs::weakly_canonical(full, ec2);
  if (ec1 || ec2) return refuse("cannot be resolved");
  if (!isWithin(realDir, realFull) || realFull == realDir)
    return refuse(fmt::format("resolves to '{}', outside the model's folder", realFull.string()));
  return full.string();
}

Result<ir::Tensor> loadExternalTensor(const ir::Graph& g, ir::ValueId v) {
  FBL_ASSERT(v >= 0 && v < static_cast<ir::ValueId>(g.values.size()));
  const ir::Value& val = g.values[v];
  FBL_ASSERT(val.external.has_value());
  const ir::ExternalData& ext = *val.external;
  FBL_ASSIGN(std::string path, resolveExternalPath(g.sourcePath, ext.location, val.name));

  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ENOENT)
      return makeError("{}: tensor '{}': external data file '{}' is missing", g.sourcePath,
                       val.name, path);
    return makeError("{}: tensor '{}': cannot open external data file '{}' ({})", g.sourcePath,
                     val.name, path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return makeError("{}: tensor '{}': external data '{}' is not a regular file", g.sourcePath,
                     val.name, path);
  const int64_t size = st.st_size;
  const int64_t need = ir::numElements(val.shape) * static_cast<int64_t>(ir::dtypeSize(val.dtype));
  const int64_t length = ext.length < 0 ? size - ext.offset : ext.length;
  if (ext.offset < 0 || ext.offset > size || length < 0 || length > size - ext.offset)
    return makeError("{}: tensor '{}': offset {} and length {} lie outside '{}' ({} bytes)",
                     g.sourcePath, val.name, ext.offset, length, path, size);
  if (length != need)
    return makeError("{}: tensor '{}': external data holds {} bytes but shape {} of {} needs {}",
                     g.sourcePath, val.name, length, ir::shapeToString(val.shape),
                     ir::dtypeName(val.dtype), need);
  ir::Tensor t(val.dtype, val.shape);
  FBL_TRY(readFully(f.fd, t.raw(), static_cast<size_t>(need), ext.offset, path));
  if (val.dtype == ir::DType::Bool)
    for (int64_t i = 0; i < need; ++i) t.raw()[i] = std::byte(t.raw()[i] != std::byte(0));
  return t;
}

Status loadAvailableExternalData(ir::Graph& g) {
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g.values.size()); ++v) {
    ir::Value& val = g.values[v];
    if (!val.external || val.data) continue;
    FBL_ASSIGN(std::string path, resolveExternalPath(g.sourcePath, val.external->location, val.name));
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    FBL_ASSIGN(ir::Tensor t, loadExternalTensor(g, v));
    val.data = std::make_shared<const ir::Tensor>(std::move(t));
  }
  return {};
}

Status requireInitializerData(const ir::Graph& g) {
  const std::vector<bool> live = g.liveValues();
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g.values.size()); ++v) {
    const ir::Value& val = g.values[v];
    if (!live[v] || val.kind != ir::ValueKind::Initializer || val.data) continue;
    if (!val.external) return makeError("{}: initializer '{}' has no data", g.sourcePath, val.name);
    FBL_TRY(loadExternalTensor(g, v));  // fails, saying why (a file present was loaded at import)
    return makeError("{}: initializer '{}': its external data was not loaded", g.sourcePath, val.name);
  }
  return Status::success();
}

}  // namespace fbl::onnx
