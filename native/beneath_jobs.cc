// The confined file jobs (beneath_posix.cc): marshalling only, one
// thread-pool job per call, resolving with plain values; an OS failure is
// in them, never a rejection. A job never blocks on the file it is given
// (beneath_posix.cc says why), so an agent cannot hold a pool thread.
#include <napi.h>

#include <string>

#include "addon.h"
#include "beneath.h"

namespace {

using proclease::addon::IsInt;
using proclease::addon::ThrowType;

class BeneathWorker : public proclease::addon::PromiseWorker {
 public:
  BeneathWorker(Napi::Env env, proclease::BeneathTarget t) : PromiseWorker(env), t_(std::move(t)) {}

 protected:
  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("err", Napi::Number::New(env, r_.err));
    out.Set("step", Napi::Number::New(env, r_.step));
    out.Set("how", Napi::Number::New(env, r_.how));
    out.Set("mode", Napi::Number::New(env, r_.mode));
    out.Set("size", Napi::Number::New(env, r_.size));
    out.Set("created", Napi::Boolean::New(env, r_.created));
    out.Set("data", Napi::Buffer<char>::Copy(env, r_.data.data(), r_.data.size()));
    deferred_.Resolve(out);
  }

  proclease::BeneathTarget t_;
  proclease::BeneathResult r_;
};

class ReadWorker : public BeneathWorker {
 public:
  ReadWorker(Napi::Env env, proclease::BeneathTarget t, size_t max) : BeneathWorker(env, std::move(t)), max_(max) {}

 protected:
  void Execute() override { proclease::ReadBeneath(t_, max_, r_); }

 private:
  size_t max_;
};

class WriteWorker : public BeneathWorker {
 public:
  WriteWorker(Napi::Env env, proclease::BeneathTarget t, std::string data) : BeneathWorker(env, std::move(t)), data_(std::move(data)) {}

 protected:
  void Execute() override { proclease::WriteBeneath(t_, data_, r_); }

 private:
  std::string data_;
};

// root, rootDev, rootIno, rel, walkOnly: the first five arguments of both calls.
bool Target(const Napi::CallbackInfo& info, proclease::BeneathTarget& t) {
  if (info.Length() < 5 || !info[0].IsString() || !info[1].IsBigInt() || !info[2].IsBigInt() || !info[3].IsString() || !info[4].IsBoolean()) return false;
  bool lossless = true;
  t.root = info[0].As<Napi::String>().Utf8Value();
  t.rootDev = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) return false;
  t.rootIno = info[2].As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) return false;
  t.rel = info[3].As<Napi::String>().Utf8Value();
  t.walkOnly = info[4].As<Napi::Boolean>().Value();
  return true;
}

// readBeneath(root, rootDev, rootIno, rel, walkOnly, maxBytes) → Promise<{ err, step, how, mode, size, created, data }>
Napi::Value JsReadBeneath(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  proclease::BeneathTarget t;
  if (!Target(info, t) || info.Length() < 6 || !IsInt(info[5]) || info[5].As<Napi::Number>().Int32Value() < 0) {
    return ThrowType(env, "readBeneath(root: string, rootDev: bigint, rootIno: bigint, rel: string, walkOnly: boolean, maxBytes: non-negative int)");
  }
  auto* worker = new ReadWorker(env, std::move(t), static_cast<size_t>(info[5].As<Napi::Number>().Int32Value()));
  return proclease::addon::Start(worker);
}

// writeBeneath(root, rootDev, rootIno, rel, walkOnly, data) → Promise<{ err, step, how, mode, size, created, data }>
Napi::Value JsWriteBeneath(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  proclease::BeneathTarget t;
  if (!Target(info, t) || info.Length() < 6 || !info[5].IsBuffer()) {
    return ThrowType(env, "writeBeneath(root: string, rootDev: bigint, rootIno: bigint, rel: string, walkOnly: boolean, data: Buffer)");
  }
  Napi::Buffer<char> buf = info[5].As<Napi::Buffer<char>>();
  auto* worker = new WriteWorker(env, std::move(t), std::string(buf.Data(), buf.Length()));
  return proclease::addon::Start(worker);
}

}  // namespace

void proclease::addon::ExportBeneathJobs(Napi::Env env, Napi::Object exports) {
  exports.Set("readBeneath", Napi::Function::New(env, JsReadBeneath, "readBeneath"));
  exports.Set("writeBeneath", Napi::Function::New(env, JsWriteBeneath, "writeBeneath"));
}
