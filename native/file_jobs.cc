// The state dir's file jobs (files_posix.cc): marshalling only, one
// thread-pool job per call, resolving with plain values; an OS failure is
// in them, never a rejection.
#include <napi.h>

#include <string>
#include <vector>

#include "addon.h"
#include "facts.h"

namespace {

using proclease::addon::IsInt;
using proclease::addon::ThrowType;

class ReadFilesWorker : public proclease::addon::PromiseWorker {
 public:
  ReadFilesWorker(Napi::Env env, std::vector<std::string> paths, size_t maxBytes)
      : PromiseWorker(env), paths_(std::move(paths)), max_(maxBytes), r_(paths_.size()) {}

 protected:
  void Execute() override {
    for (size_t i = 0; i < paths_.size(); i++) proclease::ReadSmallFile(paths_[i], max_, r_[i]);
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Napi::Array all = Napi::Array::New(env, r_.size());
    for (size_t i = 0; i < r_.size(); i++) {
      const proclease::SmallFileRead& r = r_[i];
      Napi::Object out = Napi::Object::New(env);
      out.Set("err", Napi::Number::New(env, r.err));
      out.Set("step", Napi::Number::New(env, r.step));
      out.Set("regular", Napi::Boolean::New(env, r.regular));
      out.Set("tooLarge", Napi::Boolean::New(env, r.tooLarge));
      out.Set("ino", Napi::Number::New(env, r.ino));
      out.Set("dev", Napi::Number::New(env, r.dev));
      out.Set("mode", Napi::Number::New(env, r.mode));
      out.Set("uid", Napi::Number::New(env, r.uid));
      out.Set("size", Napi::Number::New(env, r.size));
      out.Set("mtimeMs", Napi::Number::New(env, r.mtimeMs));
      out.Set("text", Napi::String::New(env, r.data));
      all.Set(static_cast<uint32_t>(i), out);
    }
    deferred_.Resolve(all);
  }

 private:
  std::vector<std::string> paths_;
  size_t max_;
  std::vector<proclease::SmallFileRead> r_;
};

// readSmallFiles(paths, maxBytes) → Promise<Array<{ err, step, regular, tooLarge, ino, dev, mode, uid, size, mtimeMs, text }>>
Napi::Value ReadSmallFiles(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "readSmallFiles(paths: string[], maxBytes: non-negative int)";
  if (info.Length() < 2 || !info[0].IsArray() || !IsInt(info[1]) || info[1].As<Napi::Number>().Int32Value() < 0) return ThrowType(env, usage);
  Napi::Array list = info[0].As<Napi::Array>();
  std::vector<std::string> paths;
  paths.reserve(list.Length());
  for (uint32_t i = 0; i < list.Length(); i++) {
    Napi::Value v = list.Get(i);
    if (!v.IsString()) return ThrowType(env, usage);
    paths.push_back(v.As<Napi::String>().Utf8Value());
  }
  auto* worker = new ReadFilesWorker(env, std::move(paths), static_cast<size_t>(info[1].As<Napi::Number>().Int32Value()));
  return proclease::addon::Start(worker);
}

// A write or removal job: 0 or -errno, and the step it stopped at.
class FileStepWorker : public proclease::addon::PromiseWorker {
 public:
  explicit FileStepWorker(Napi::Env env) : PromiseWorker(env) {}

 protected:
  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("err", Napi::Number::New(env, rc_));
    out.Set("step", Napi::Number::New(env, step_));
    out.Set("removing", Napi::Boolean::New(env, removing_));
    deferred_.Resolve(out);
  }

  int rc_ = 0;
  int step_ = 0;
  bool removing_ = false;
};

class ReplaceFileWorker : public FileStepWorker {
 public:
  ReplaceFileWorker(Napi::Env env, std::string dir, std::string tmp, std::string target, std::string data, bool durable)
      : FileStepWorker(env), dir_(std::move(dir)), tmp_(std::move(tmp)), target_(std::move(target)), data_(std::move(data)), durable_(durable) {}

 protected:
  void Execute() override { rc_ = proclease::ReplaceFile(dir_, tmp_, target_, data_, durable_, step_); }

 private:
  std::string dir_, tmp_, target_, data_;
  bool durable_;
};

// replaceFile(dir, tmp, target, data, durable) → Promise<{ err, step }>
Napi::Value ReplaceFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 5 || !info[0].IsString() || !info[1].IsString() || !info[2].IsString() || !info[3].IsString() || !info[4].IsBoolean()) {
    return ThrowType(env, "replaceFile(dir: string, tmp: string, target: string, data: string, durable: boolean)");
  }
  auto* worker = new ReplaceFileWorker(env, info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value(),
                                       info[2].As<Napi::String>().Utf8Value(), info[3].As<Napi::String>().Utf8Value(), info[4].As<Napi::Boolean>().Value());
  return proclease::addon::Start(worker);
}

class RemoveFileWorker : public FileStepWorker {
 public:
  RemoveFileWorker(Napi::Env env, std::string dir, std::string target, bool durable)
      : FileStepWorker(env), dir_(std::move(dir)), target_(std::move(target)), durable_(durable) {}

 protected:
  void Execute() override { rc_ = proclease::RemoveFile(dir_, target_, durable_, step_); }

 private:
  std::string dir_, target_;
  bool durable_;
};

// removeFile(dir, target, durable) → Promise<{ err, step }>
Napi::Value RemoveFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[1].IsString() || !info[2].IsBoolean()) {
    return ThrowType(env, "removeFile(dir: string, target: string, durable: boolean)");
  }
  auto* worker = new RemoveFileWorker(env, info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value(), info[2].As<Napi::Boolean>().Value());
  return proclease::addon::Start(worker);
}

class MoveFileWorker : public FileStepWorker {
 public:
  MoveFileWorker(Napi::Env env, proclease::FileMove move) : FileStepWorker(env), move_(std::move(move)) {}

 protected:
  void Execute() override { rc_ = proclease::MoveFile(move_, step_, removing_); }

 private:
  proclease::FileMove move_;
};

// moveFile(dir, tmp, target, data, durable, fromDir, from) → Promise<{ err, step, removing }>
Napi::Value MoveFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 7 || !info[0].IsString() || !info[1].IsString() || !info[2].IsString() || !info[3].IsString() || !info[4].IsBoolean() ||
      !info[5].IsString() || !info[6].IsString()) {
    return ThrowType(env, "moveFile(dir: string, tmp: string, target: string, data: string, durable: boolean, fromDir: string, from: string)");
  }
  proclease::FileMove m;
  m.dir = info[0].As<Napi::String>().Utf8Value();
  m.tmp = info[1].As<Napi::String>().Utf8Value();
  m.target = info[2].As<Napi::String>().Utf8Value();
  m.data = info[3].As<Napi::String>().Utf8Value();
  m.durable = info[4].As<Napi::Boolean>().Value();
  m.fromDir = info[5].As<Napi::String>().Utf8Value();
  m.from = info[6].As<Napi::String>().Utf8Value();
  auto* worker = new MoveFileWorker(env, std::move(m));
  return proclease::addon::Start(worker);
}

// Here, not in proclease::addon, where the names would find proclease's own ReplaceFile and the rest.
void Export(Napi::Env env, Napi::Object exports) {
  exports.Set("readSmallFiles", Napi::Function::New(env, ReadSmallFiles, "readSmallFiles"));
  exports.Set("replaceFile", Napi::Function::New(env, ReplaceFile, "replaceFile"));
  exports.Set("removeFile", Napi::Function::New(env, RemoveFile, "removeFile"));
  exports.Set("moveFile", Napi::Function::New(env, MoveFile, "moveFile"));
}

}  // namespace

void proclease::addon::ExportFileJobs(Napi::Env env, Napi::Object exports) { Export(env, exports); }
