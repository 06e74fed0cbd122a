// The GPU machine's probe: device properties, stream priorities, a cuBLASLt bf16
// GEMM, and what NCCL allows with several ranks on one device.
// Build: nvcc -O2 -arch=sm_90 -o probe probe.cu -lcublasLt -lnccl
// Run:   bench/gpu_probe/probe.sh (see bench/results/2026-12-04-gpu-machine-probe.md)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <nccl.h>
#define CK(x) do{cudaError_t e=(x); if(e){printf("CUDA %s: %s\n",#x,cudaGetErrorString(e)); return 1;}}while(0)
static int gemm(){
  cublasLtHandle_t h; if(cublasLtCreate(&h)){puts("ltcreate fail");return 1;}
  int n=8192; size_t b=(size_t)n*n*2; void *A,*B,*C,*ws; CK(cudaMalloc(&A,b));CK(cudaMalloc(&B,b));CK(cudaMalloc(&C,b));
  size_t wsz=64<<20; CK(cudaMalloc(&ws,wsz)); cudaMemset(A,0x3c,b); cudaMemset(B,0x3c,b);
  cublasLtMatmulDesc_t d; cublasLtMatmulDescCreate(&d,CUBLAS_COMPUTE_32F,CUDA_R_32F);
  cublasLtMatrixLayout_t la; cublasLtMatrixLayoutCreate(&la,CUDA_R_16BF,n,n,n);
  cublasLtMatmulPreference_t p; cublasLtMatmulPreferenceCreate(&p);
  cublasLtMatmulPreferenceSetAttribute(p,CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,&wsz,sizeof wsz);
  cublasLtMatmulHeuristicResult_t r; int got=0;
  cublasLtMatmulAlgoGetHeuristic(h,d,la,la,la,la,p,1,&r,&got); if(!got){puts("no algo");return 1;}
  float al=1,be=0; cudaEvent_t e0,e1; cudaEventCreate(&e0);cudaEventCreate(&e1);
  for(int i=0;i<3;i++) cublasLtMatmul(h,d,&al,A,la,B,la,&be,C,la,C,la,&r.algo,ws,wsz,0);
  cudaEventRecord(e0); for(int i=0;i<10;i++) cublasLtMatmul(h,d,&al,A,la,B,la,&be,C,la,C,la,&r.algo,ws,wsz,0);
  cudaEventRecord(e1); CK(cudaEventSynchronize(e1)); float ms; cudaEventElapsedTime(&ms,e0,e1);
  printf("cublasLt bf16 8192^3: %.1f TFLOP/s (version %zu)\n", 10*2.0*n*n*(double)n/(ms*1e-3)/1e12, cublasLtGetVersion());
  return 0;
}
static int nccl_rank(int rank,const char*idfile){
  ncclUniqueId id; 
  char tmp[4096]; snprintf(tmp,sizeof tmp,"%s.tmp",idfile);
  if(rank==0){ ncclGetUniqueId(&id); FILE*f=fopen(tmp,"wb");
    if(!f||fwrite(&id,sizeof id,1,f)!=1||fclose(f)||rename(tmp,idfile)){perror(tmp);return 1;} }
  else { FILE*f=0; for(int i=0;i<200&&!(f=fopen(idfile,"rb"));i++) usleep(50000);
    if(!f||fread(&id,sizeof id,1,f)!=1){puts("no id");return 1;} fclose(f);}
  CK(cudaSetDevice(0)); ncclComm_t c; ncclResult_t r=ncclCommInitRank(&c,2,id,rank);
  printf("rank %d init: %s\n",rank,ncclGetErrorString(r)); if(r) return 1;
  float*x; CK(cudaMalloc(&x,4*1024)); float v[1024]; for(int i=0;i<1024;i++)v[i]=rank+1; cudaMemcpy(x,v,4096,cudaMemcpyHostToDevice);
  r=ncclAllReduce(x,x,1024,ncclFloat,ncclSum,c,0); cudaStreamSynchronize(0); cudaMemcpy(v,x,4096,cudaMemcpyDeviceToHost);
  printf("rank %d allreduce: %s value %g (want 3)\n",rank,ncclGetErrorString(r),v[0]); ncclCommDestroy(c); return 0;
}
int main(int argc,char**argv){
  int ver; ncclGetVersion(&ver); 
  if(argc>2) return nccl_rank(atoi(argv[1]),argv[2]);
  printf("nccl runtime version %d\n",ver);
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr,0)); int rt,dv; cudaRuntimeGetVersion(&rt); cudaDriverGetVersion(&dv);
  printf("%s sm_%d%d SMs %d mem %.1f GiB L2 %d MB runtime %d driver %d asyncEngines %d\n",pr.name,pr.major,pr.minor,pr.multiProcessorCount,pr.totalGlobalMem/1073741824.0,pr.l2CacheSize>>20,rt,dv,pr.asyncEngineCount);
  int lo,hi; cudaDeviceGetStreamPriorityRange(&lo,&hi); printf("stream priorities least %d greatest %d\n",lo,hi);
  if(gemm()) return 1;
  ncclComm_t cs[2]; int devs[2]={0,0}; ncclResult_t r=ncclCommInitAll(cs,2,devs);
  printf("ncclCommInitAll {0,0}: %s\n",ncclGetErrorString(r));
  return 0;
}
